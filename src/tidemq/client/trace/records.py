"""RocketMQ's message-trace data format (sans-IO): records in, text out, and back.

A trace message's body is UTF-8 text holding one or more records, each ended
by FIELD_SEPARATOR (\\x02); a record's fields are separated by
CONTENT_SEPARATOR (\\x01) and its first field names its type
(apache/rocketmq client/.../trace/TraceConstants.java, TraceType.java). The
field order, as TraceDataEncoder.encoderFromContextBean writes it:

    Pub             Pub, timestamp, regionId, group, topic, msgId, tags, keys,
                    storeHost, bodyLength, costTime, msgType, offsetMsgId, success
    SubBefore       SubBefore, timestamp, regionId, group, requestId, msgId,
                    retryTimes, keys
    SubAfter        SubAfter, requestId, msgId, costTime, success, keys,
                    contextCode, [timestamp, group]  (the last two unless the
                    access channel is CLOUD; CLOUD leaves a trailing \\x01)
    EndTransaction  EndTransaction, timestamp, regionId, group, topic, msgId,
                    tags, keys, storeHost, msgType, transactionId,
                    transactionState, fromTransactionCheck
    Recall          Recall, timestamp, regionId, group, topic, msgId, success

Values are written as Java's StringBuilder.append writes them: booleans
"true"/"false", a null string "null" (a message without tags or keys traces
them as "null"; this codec reads "null" back as None, as no reader can tell it
from a tag named "null"). Nothing is escaped: the values come from topics,
groups and message properties, which cannot hold either separator.

The decoder follows TraceDataEncoder.decoderFromTraceDataString: it splits as
Java's String.split does (trailing empty fields dropped), reads the older
layouts Java still reads (a Pub of 13 fields, a Pub with a 15th field, the
client host; a SubAfter without contextCode or timestamp/group), and treats
a missing trailing text field as empty. Where Java would throw (a number that
is not one, a field missing, an unknown message type or transaction state),
the record is skipped with the reason in DecodedTrace.skipped, so one bad
record never hides the others of a trace message; an unknown record type is
skipped too (Java ignores it).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

__all__ = [
    "CONTENT_SEPARATOR",
    "DEFAULT_REGION",
    "DEFAULT_TRACE_TOPIC",
    "FIELD_SEPARATOR",
    "TRANSACTION_STATES",
    "ConsumeReturnType",
    "DecodedTrace",
    "EndTransactionRecord",
    "PubRecord",
    "RecallRecord",
    "SkippedRecord",
    "SubAfterRecord",
    "SubBeforeRecord",
    "TraceFormatError",
    "TraceMessageType",
    "TraceRecord",
    "TraceType",
    "decode_record",
    "decode_trace_data",
    "encode_record",
    "encode_records",
    "record_keys",
]

CONTENT_SEPARATOR = "\x01"
"""TraceConstants.CONTENT_SPLITOR: between the fields of one record."""
FIELD_SEPARATOR = "\x02"
"""TraceConstants.FIELD_SPLITOR: after each record."""
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""TopicValidator.RMQ_SYS_TRACE_TOPIC: where traces go unless configured otherwise."""
DEFAULT_REGION = "DefaultRegion"
"""MixAll.DEFAULT_TRACE_REGION_ID: the region when the broker names none."""
NULL_TEXT = "null"
"""What Java appends for a null string."""
TRANSACTION_STATES = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")
"""LocalTransactionState names, as EndTransaction records carry them."""

_INT32 = (-(2**31), 2**31 - 1)
# The record classes are plain (not frozen) slots dataclasses: a client builds one
# per traced message, and a frozen dataclass costs about five times as much to build.
_INT64 = (-(2**63), 2**63 - 1)
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


class TraceFormatError(ValueError):
    """A record that is not in the trace format (what is wrong, and where)."""


class TraceType(enum.Enum):
    """TraceType: the first field of every record."""

    PUB = "Pub"
    RECALL = "Recall"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class TraceMessageType(enum.IntEnum):
    """MessageType, written as its ordinal; `java_name` is the enum constant's name."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3
    ORDER = 4

    @property
    def java_name(self) -> str:
        return _MESSAGE_TYPE_NAMES[self]


_MESSAGE_TYPE_NAMES = {
    TraceMessageType.NORMAL: "Normal_Msg",
    TraceMessageType.TRANS_HALF: "Trans_Msg_Half",
    TraceMessageType.TRANS_COMMIT: "Trans_msg_Commit",
    TraceMessageType.DELAY: "Delay_Msg",
    TraceMessageType.ORDER: "Order_Msg",
}


class ConsumeReturnType(enum.IntEnum):
    """ConsumeReturnType: a SubAfter's contextCode is its ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class PubRecord:
    """A send the broker answered (SendMessageTraceHookImpl)."""

    timestamp_ms: int
    """When the send started (client clock)."""
    region_id: str
    group: str
    topic: str
    msg_id: str
    """The client id (UNIQ_KEY)."""
    tags: str | None
    keys: str | None
    """KEYS as the message carries them: space-separated."""
    store_host: str
    """The broker address the message was sent to."""
    body_length: int
    cost_ms: int
    msg_type: TraceMessageType
    offset_msg_id: str
    success: bool
    """The send status was SEND_OK."""
    client_host: str | None = None
    """Only in records of old clients (a 15th field); Java's encoder no longer writes it."""

    trace_type: ClassVar[TraceType] = TraceType.PUB


@dataclass(slots=True)
class SubBeforeRecord:
    """A message handed to a consumer's listener (one per message of the call)."""

    timestamp_ms: int
    region_id: str
    group: str
    request_id: str
    """Shared with the SubAfter record of the same call."""
    msg_id: str
    retry_times: int
    """The message's reconsume times: 0 on its first delivery."""
    keys: str | None

    trace_type: ClassVar[TraceType] = TraceType.SUB_BEFORE


@dataclass(slots=True)
class SubAfterRecord:
    """What the listener call of a SubBefore came to."""

    request_id: str
    msg_id: str
    cost_ms: int
    """The call's time divided by the messages it was given."""
    success: bool
    keys: str | None
    context_code: int = ConsumeReturnType.SUCCESS
    """A ConsumeReturnType ordinal."""
    timestamp_ms: int | None = None
    """When the call started; None in the CLOUD layout (and old records)."""
    group: str | None = None
    """None in the CLOUD layout (and old records)."""

    trace_type: ClassVar[TraceType] = TraceType.SUB_AFTER


@dataclass(slots=True)
class EndTransactionRecord:
    """A transaction ended by its producer (EndTransactionTraceHookImpl)."""

    timestamp_ms: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    tags: str | None
    keys: str | None
    store_host: str
    msg_type: TraceMessageType
    """Java writes Trans_msg_Commit whatever the state."""
    transaction_id: str | None
    transaction_state: str
    """One of TRANSACTION_STATES."""
    from_transaction_check: bool

    trace_type: ClassVar[TraceType] = TraceType.END_TRANSACTION


@dataclass(slots=True)
class RecallRecord:
    """A timer message recalled (DefaultRecallMessageTraceHook, RocketMQ 5.3)."""

    timestamp_ms: int
    region_id: str
    group: str
    topic: str
    msg_id: str
    success: bool

    trace_type: ClassVar[TraceType] = TraceType.RECALL


TraceRecord = PubRecord | SubBeforeRecord | SubAfterRecord | EndTransactionRecord | RecallRecord


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    text: str
    """The record as found (without its separator)."""
    reason: str


@dataclass(frozen=True, slots=True)
class DecodedTrace:
    records: tuple[TraceRecord, ...]
    skipped: tuple[SkippedRecord, ...] = field(default=())


# -- encoding ----------------------------------------------------------------------------


def _text(value: str | None) -> str:
    return NULL_TEXT if value is None else value


def _bool(value: bool) -> str:
    return "true" if value else "false"


def encode_record(record: TraceRecord) -> str:
    """One record as TraceDataEncoder writes it, its FIELD_SEPARATOR included."""
    if isinstance(record, PubRecord):
        fields = [
            TraceType.PUB.value,
            str(record.timestamp_ms),
            record.region_id,
            record.group,
            record.topic,
            record.msg_id,
            _text(record.tags),
            _text(record.keys),
            record.store_host,
            str(record.body_length),
            str(record.cost_ms),
            str(int(record.msg_type)),
            record.offset_msg_id,
            _bool(record.success),
        ]
    elif isinstance(record, SubBeforeRecord):
        fields = [
            TraceType.SUB_BEFORE.value,
            str(record.timestamp_ms),
            record.region_id,
            record.group,
            record.request_id,
            record.msg_id,
            str(record.retry_times),
            _text(record.keys),
        ]
    elif isinstance(record, SubAfterRecord):
        fields = [
            TraceType.SUB_AFTER.value,
            record.request_id,
            record.msg_id,
            str(record.cost_ms),
            _bool(record.success),
            _text(record.keys),
            str(record.context_code),
        ]
        if record.timestamp_ms is None:  # the CLOUD layout: contextCode, then a bare \x01
            fields.append("")
        else:
            fields += [str(record.timestamp_ms), record.group or ""]
    elif isinstance(record, EndTransactionRecord):
        fields = [
            TraceType.END_TRANSACTION.value,
            str(record.timestamp_ms),
            record.region_id,
            record.group,
            record.topic,
            record.msg_id,
            _text(record.tags),
            _text(record.keys),
            record.store_host,
            str(int(record.msg_type)),
            _text(record.transaction_id),
            record.transaction_state,
            _bool(record.from_transaction_check),
        ]
    else:
        fields = [
            TraceType.RECALL.value,
            str(record.timestamp_ms),
            record.region_id,
            record.group,
            record.topic,
            record.msg_id,
            _bool(record.success),
        ]
    text = CONTENT_SEPARATOR.join(fields)
    if text.count(CONTENT_SEPARATOR) != len(fields) - 1 or FIELD_SEPARATOR in text:
        bad = next(v for v in fields if CONTENT_SEPARATOR in v or FIELD_SEPARATOR in v)
        raise ValueError(f"a trace field holds a separator character: {bad!r}")
    return text + FIELD_SEPARATOR


def encode_records(records: Iterable[TraceRecord]) -> str:
    return "".join(encode_record(record) for record in records)


def record_keys(record: TraceRecord) -> list[str]:
    """The keys a trace message carrying `record` is indexed by: the traced
    msgId and each of the message's keys (TraceDataEncoder's transKey), so
    that a key query on the trace topic finds it."""
    keys = [record.msg_id]
    raw = getattr(record, "keys", None)
    if raw:
        keys.extend(key for key in raw.split(" ") if key)
    return keys


# -- decoding ----------------------------------------------------------------------------


def _java_split(text: str, separator: str) -> list[str]:
    """String.split(separator): trailing empty strings removed."""
    parts = text.split(separator)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


class _Fields:
    """The fields of one record, read with Java's parsers and clear errors."""

    __slots__ = ("kind", "parts")

    def __init__(self, kind: str, parts: Sequence[str]) -> None:
        self.kind = kind
        self.parts = parts

    def __len__(self) -> int:
        return len(self.parts)

    def text(self, index: int, name: str) -> str:
        """A text field; one missing at the end reads as empty (Java's split dropped it)."""
        return self.parts[index] if index < len(self.parts) else ""

    def nullable(self, index: int, name: str) -> str | None:
        value = self.text(index, name)
        return None if value == NULL_TEXT else value

    def number(self, index: int, name: str, bounds: tuple[int, int] = _INT32) -> int:
        """Integer.parseInt / Long.parseLong: an optional sign and ASCII digits, in range."""
        if index >= len(self.parts):
            raise TraceFormatError(f"{self.kind} record without {name} (field {index})")
        value = self.parts[index]
        if _JAVA_INTEGER.fullmatch(value) is None:
            raise TraceFormatError(f"{self.kind} record: {name} {value[:40]!r} is not a number")
        number = int(value)
        if not bounds[0] <= number <= bounds[1]:
            raise TraceFormatError(f"{self.kind} record: {name} {value[:40]} is out of range")
        return number

    def timestamp(self, index: int) -> int:
        return self.number(index, "timestamp", _INT64)

    def flag(self, index: int) -> bool:
        """Boolean.parseBoolean: "true" in any case is true, anything else false."""
        return self.text(index, "flag").lower() == "true"

    def message_type(self, index: int) -> TraceMessageType:
        ordinal = self.number(index, "msgType")
        try:
            return TraceMessageType(ordinal)
        except ValueError:
            raise TraceFormatError(f"{self.kind} record: msgType {ordinal} is unknown") from None


def _pub(f: _Fields) -> PubRecord:
    if len(f) < 12:
        raise TraceFormatError(f"Pub record with {len(f)} fields, fewer than 12")
    # 13 fields: the layout before offsetMsgId; 14: today's; 15 or more: with the client host.
    offset_msg_id, success_at = ("", 12) if len(f) == 13 else (f.text(12, "offsetMsgId"), 13)
    return PubRecord(
        timestamp_ms=f.timestamp(1),
        region_id=f.text(2, "regionId"),
        group=f.text(3, "group"),
        topic=f.text(4, "topic"),
        msg_id=f.text(5, "msgId"),
        tags=f.nullable(6, "tags"),
        keys=f.nullable(7, "keys"),
        store_host=f.text(8, "storeHost"),
        body_length=f.number(9, "bodyLength"),
        cost_ms=f.number(10, "costTime"),
        msg_type=f.message_type(11),
        offset_msg_id=offset_msg_id,
        success=f.flag(success_at) if len(f) > success_at else True,
        client_host=f.text(14, "clientHost") if len(f) >= 15 else None,
    )


def _sub_before(f: _Fields) -> SubBeforeRecord:
    return SubBeforeRecord(
        timestamp_ms=f.timestamp(1),
        region_id=f.text(2, "regionId"),
        group=f.text(3, "group"),
        request_id=f.text(4, "requestId"),
        msg_id=f.text(5, "msgId"),
        retry_times=f.number(6, "retryTimes"),
        keys=f.nullable(7, "keys"),
    )


def _sub_after(f: _Fields) -> SubAfterRecord:
    has_time = len(f) >= 8
    return SubAfterRecord(
        request_id=f.text(1, "requestId"),
        msg_id=f.text(2, "msgId"),
        cost_ms=f.number(3, "costTime"),
        success=f.flag(4),
        keys=f.nullable(5, "keys"),
        context_code=f.number(6, "contextCode") if len(f) >= 7 else ConsumeReturnType.SUCCESS,
        timestamp_ms=f.timestamp(7) if has_time else None,
        group=f.text(8, "group") if has_time else None,
    )


def _end_transaction(f: _Fields) -> EndTransactionRecord:
    state = f.text(11, "transactionState")
    if state not in TRANSACTION_STATES:
        raise TraceFormatError(
            f"EndTransaction record: transaction state {state[:40]!r} is unknown"
        )
    return EndTransactionRecord(
        timestamp_ms=f.timestamp(1),
        region_id=f.text(2, "regionId"),
        group=f.text(3, "group"),
        topic=f.text(4, "topic"),
        msg_id=f.text(5, "msgId"),
        tags=f.nullable(6, "tags"),
        keys=f.nullable(7, "keys"),
        store_host=f.text(8, "storeHost"),
        msg_type=f.message_type(9),
        transaction_id=f.nullable(10, "transactionId"),
        transaction_state=state,
        from_transaction_check=f.flag(12),
    )


def _recall(f: _Fields) -> RecallRecord:
    return RecallRecord(
        timestamp_ms=f.timestamp(1),
        region_id=f.text(2, "regionId"),
        group=f.text(3, "group"),
        topic=f.text(4, "topic"),
        msg_id=f.text(5, "msgId"),
        success=f.flag(6),
    )


_DECODERS: dict[str, Callable[[_Fields], TraceRecord]] = {
    TraceType.PUB.value: _pub,
    TraceType.SUB_BEFORE.value: _sub_before,
    TraceType.SUB_AFTER.value: _sub_after,
    TraceType.END_TRANSACTION.value: _end_transaction,
    TraceType.RECALL.value: _recall,
}


def decode_record(text: str) -> TraceRecord:
    """One record (without its FIELD_SEPARATOR); TraceFormatError if it is not one."""
    parts = _java_split(text, CONTENT_SEPARATOR)
    decoder = _DECODERS.get(parts[0])
    if decoder is None:
        raise TraceFormatError(f"unknown trace record type {parts[0][:40]!r}")
    return decoder(_Fields(parts[0], parts))


def decode_trace_data(data: str | bytes) -> DecodedTrace:
    """Every record of a trace message's body, and those that could not be read.

    Bytes are read as UTF-8 (an undecodable byte becomes U+FFFD, as Java's
    `new String(body, UTF_8)` does); empty records are ignored."""
    if isinstance(data, bytes | bytearray | memoryview):
        data = bytes(data).decode("utf-8", errors="replace")
    records: list[TraceRecord] = []
    skipped: list[SkippedRecord] = []
    for text in _java_split(data, FIELD_SEPARATOR):
        if not text:
            continue
        try:
            records.append(decode_record(text))
        except TraceFormatError as exc:
            skipped.append(SkippedRecord(text, str(exc)))
    return DecodedTrace(tuple(records), tuple(skipped))
