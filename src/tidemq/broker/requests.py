"""What the broker's front doors hand its processors, and what they get back.

The request and result records of send and pull, the refusal every
processor method raises (`BrokerError`), and the pure helpers both
protocols share (`message_queue_key`, `pull_code`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tidemq.protocol.codes import ResponseCode
from tidemq.store.api import GetStatus

MASTER_ID = 0


class BrokerError(Exception):
    """A refused request: a RocketMQ response code and a readable remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as a JSON map key: the object's compact text, keys sorted.

    Java's fastjson writes such maps with object keys, which standard JSON
    cannot hold; fastjson reads this string form back, and so does tidemq's
    admin client."""
    return json.dumps(
        {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
        separators=(",", ":"),
        sort_keys=True,
    )


# -- requests and results ---------------------------------------------------------


@dataclass(slots=True)
class SendRequest:
    """One send (or one batch) as the protocol front door decoded it."""

    producer_group: str
    topic: str
    queue_id: int
    body: bytes
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    reconsume_times: int = 0
    max_reconsume_times: int | None = None
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    unit_mode: bool = False
    batch: bool = False


@dataclass(slots=True)
class SendResult:
    code: int
    """SUCCESS, or FLUSH_DISK_TIMEOUT (stored, not yet durable)."""
    msg_id: str
    """Offset message id(s); comma-separated for a batch."""
    queue_id: int
    queue_offset: int
    remark: str | None = None
    transaction_id: str | None = None
    """A half message's transaction id (its UNIQ_KEY), echoed as Java does."""
    recall_handle: str | None = None
    """A timer message's recall handle (RocketMQ 5.3 SendMessageResponseHeader)."""


@dataclass(slots=True)
class PullRequest:
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = 0
    suspend_timeout_ms: int = 0
    subscription: str | None = None
    sub_version: int = 0
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    client_address: str = ""


@dataclass(slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = MASTER_ID
    body: bytes = b""
    message_count: int = 0
    remark: str | None = None
    held: bool = False
    """The pull waited for a message (long polling) before this answer."""


MessageQueueKey = tuple[str, str, int]
"""(topic, broker name, queue id)."""


def pull_code(status: GetStatus, request_offset: int) -> int:
    """PULL_MESSAGE response code for a store read status (protocol doc §6.4)."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return (
            ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
        )
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL
