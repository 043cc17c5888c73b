"""What the front doors hand the pop service, and what they get back.

The remoting codes (POP_MESSAGE 200050, ACK_MESSAGE 200051,
CHANGE_MESSAGE_INVISIBLETIME 200053, BATCH_ACK_MESSAGE 200151) and the gRPC
RPCs (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue) go through the PopProcessor
(tidemq.broker.processors.pop), which makes these calls; every POP rule
(invisible time, revive, attempts, FIFO blocking, receipt handle checks)
lives once, behind `PopHooks`.

A receipt handle is RocketMQ's "extra info" text, one per delivered message:
``startOffset popTime invisibleTime reviveQid topicType brokerName queueId
queueOffset`` (space separated; topicType 0 normal, 1 retry, 2 retry v2).
The same text is the remoting `extraInfo` and the gRPC `receipt_handle`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tidemq.broker.config import MAX_INVISIBLE_TIME_MS
from tidemq.broker.requests import BrokerError
from tidemq.protocol.codes import ResponseCode

ALL_QUEUES = -1
"""`PopRequest.queue_id` meaning every readable queue of the topic (the gRPC way)."""

MIN_INVISIBLE_MS = 0
MAX_INVISIBLE_MS = MAX_INVISIBLE_TIME_MS
"""ChangeInvisibleDuration accepts 0..12 h (the Java proxy's range); a gRPC
receive's lower bound is BrokerConfig.min_invisible_time_mills_for_recv."""
MAX_POP_BATCH = 32
"""Messages per pop, as RocketMQ's receive batch size."""


class ReceiptHandleError(BrokerError):
    """A receipt handle that is malformed, forged, acked already or expired.

    Remoting answers it with `code`; gRPC with INVALID_RECEIPT_HANDLE (40013).
    """

    def __init__(self, remark: str, code: int = ResponseCode.MESSAGE_ILLEGAL) -> None:
        super().__init__(code, remark)


@dataclass(frozen=True, slots=True)
class PopRequest:
    """One receive: up to `max_nums` messages of `topic` for `group`."""

    group: str
    topic: str
    max_nums: int
    invisible_ms: int
    queue_id: int = ALL_QUEUES
    poll_ms: int = 0
    """Long polling: hold up to this long while nothing is visible (0: answer at once)."""
    expression: str | None = None
    """Tag expression ("*" or None for all) or SQL92 text, per `expression_type`."""
    expression_type: str = "TAG"
    order: bool | None = None
    """FIFO delivery; None takes it from the group's `consume_message_orderly`."""
    init_mode_max: bool = False
    """A group without an offset starts at the queue's end (else at its start)."""
    attempt_id: str | None = None
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    """One delivered message and the handle that acks it."""

    record: bytes
    """The stored record as the commit log holds it (a revived message is
    its retry-topic copy: RETRY_TOPIC names the original topic)."""
    topic: str
    """The original topic (what the consumer subscribed to)."""
    queue_id: int
    queue_offset: int
    """Position in the queue it was popped from (retry topic for a revived message)."""
    receipt_handle: str
    delivery_attempt: int
    """1 on the first delivery, +1 on every redelivery (reconsume times + 1)."""


@dataclass(slots=True)
class PopResult:
    """What a pop found. `messages` empty means nothing visible (after polling)."""

    messages: list[PoppedMessage] = field(default_factory=list)
    pop_ms: int = 0
    invisible_ms: int = 0
    rest_num: int = 0
    """Messages still waiting in the queues looked at (informational)."""
    polling_full: bool = False
    """True when the hold was refused because too many receives are held."""


class PopHooks(Protocol):
    """The pop service (BrokerPop) as the PopProcessor calls it."""

    async def pop(self, request: PopRequest) -> PopResult:
        """Pop visible messages (retry copies first when due); hold up to
        `poll_ms` when there are none. BrokerError with RocketMQ's codes for an
        unknown topic (TOPIC_NOT_EXIST), group (SUBSCRIPTION_GROUP_NOT_EXIST),
        bad expression (SUBSCRIPTION_PARSE_FAILED), bad invisible time."""
        ...

    async def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        """Consume one message for good; ReceiptHandleError if the handle is
        malformed or unknown, or (not FIFO) expired or acked already. A FIFO
        ack follows RocketMQ's broker: a late one still commits unless the
        batch was delivered again, and one for a message committed already or
        an earlier delivery is done without effect."""
        ...

    async def batch_ack(self, group: str, topic: str, receipt_handles: list[str]) -> list[bool]:
        """Ack several; per handle whether it was accepted (one refusal does
        not stop the rest)."""
        ...

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int
    ) -> str:
        """Make the message visible again `invisible_ms` from now; the new handle
        (the old one stops working)."""
        ...

    async def forward_to_dlq(self, group: str, topic: str, receipt_handle: str) -> None:
        """Store the message in %DLQ%<group> and ack it (gRPC
        ForwardMessageToDeadLetterQueue)."""
        ...

    def is_fifo(self, group: str) -> bool:
        """Whether the group consumes in FIFO order (its consume_message_orderly)."""
        ...

    async def start(self) -> None:
        """Recover checkpoints and acks, start the revive loop."""
        ...

    async def stop(self) -> None:
        """Stop reviving; persist progress and consumerOrderInfo.json."""
        ...
