"""Receipt handles: RocketMQ's "extra info" text naming one popped message.

``startOffset popTime invisibleTime reviveQid topicType brokerName queueId queueOffset``

`startOffset` is the first queue offset of the pop batch (the checkpoint's
key with `popTime`); `topicType` says which queue the message was popped
from: 0 the topic itself, 1 the group's POP retry topic. Both protocols carry
the same text (remoting `extraInfo`, gRPC `receipt_handle`), so one parser
decides what is well formed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.broker.pop.api import ReceiptHandleError

NORMAL_TOPIC = 0
RETRY_TOPIC = 1

_MAX_LEN = 512


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    start_offset: int
    pop_ms: int
    invisible_ms: int
    revive_qid: int
    topic_type: int
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def due_ms(self) -> int:
        """When the message turns visible again unless acked."""
        return self.pop_ms + self.invisible_ms

    @property
    def from_retry(self) -> bool:
        return self.topic_type == RETRY_TOPIC

    def text(self) -> str:
        return (
            f"{self.start_offset} {self.pop_ms} {self.invisible_ms} {self.revive_qid} "
            f"{self.topic_type} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )


def parse_receipt_handle(text: str) -> ReceiptHandle:
    """The handle in `text`; ReceiptHandleError naming what is wrong."""
    if not isinstance(text, str) or not text or len(text) > _MAX_LEN:
        raise ReceiptHandleError("receipt handle is malformed: empty or too long")
    parts = text.split(" ")
    if len(parts) != 8:
        raise ReceiptHandleError(f"receipt handle is malformed: {len(parts)} fields, expected 8")
    try:
        numbers = [int(p) for i, p in enumerate(parts) if i != 5]
    except ValueError:
        raise ReceiptHandleError("receipt handle is malformed: a field is not a number") from None
    start, pop_ms, invisible_ms, revive_qid, topic_type, queue_id, queue_offset = numbers
    if min(start, pop_ms, invisible_ms, revive_qid, queue_id, queue_offset) < 0:
        raise ReceiptHandleError("receipt handle is malformed: negative field")
    if topic_type not in (NORMAL_TOPIC, RETRY_TOPIC) or not parts[5]:
        raise ReceiptHandleError("receipt handle is malformed: bad topic type or broker name")
    if queue_offset < start:
        raise ReceiptHandleError("receipt handle is malformed: offset before the batch start")
    return ReceiptHandle(
        start, pop_ms, invisible_ms, revive_qid, topic_type, parts[5], queue_id, queue_offset
    )
