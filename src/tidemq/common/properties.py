"""Message property keys and the property-string encoding.

Keys and values are RocketMQ's `MessageConst` (checked against
apache/rocketmq `common/.../message/MessageConst.java`, 5.x). Names drop the
Java `PROPERTY_` prefix; where a value is not a valid identifier
(`1ST_POP_TIME`, `__SHARDINGKEY`) the name says what it is.

On the wire properties travel as one string: `key \\x01 value \\x02` for every
pair, the separator included after the last pair (Java and ali-ons both emit
it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "
"""Separates the keys inside the KEYS value."""

# -- keys set by producers ----------------------------------------------------
KEYS = "KEYS"
TAGS = "TAGS"
WAIT = "WAIT"
"""PROPERTY_WAIT_STORE_MSG_OK: "false" lets the broker answer before flush/replication."""
DELAY = "DELAY"
"""PROPERTY_DELAY_TIME_LEVEL: delay level 1..18 (0 or absent: no delay)."""
BUYER_ID = "BUYER_ID"
UNIQ_KEY = "UNIQ_KEY"
"""PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: the client-generated message id."""
EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
SHARDING_KEY = "__SHARDINGKEY"
"""RocketMQ 5 message group / ordering key."""
ALI_SHARDING_KEY = "__SHARDING_KEY"
"""ali-ons' `msg.shardingKey` (client-side queue selection only)."""
START_DELIVER_TIME = "__STARTDELIVERTIME"
"""Aliyun ONS timed delivery (epoch ms), set by ali-ons `setStartDeliverTime`."""
TRANSACTION_ID = "__transactionId__"
INSTANCE_ID = "INSTANCE_ID"
CORRELATION_ID = "CORRELATION_ID"
MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
MESSAGE_TYPE = "MSG_TYPE"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"

# -- retry, delay and timer ---------------------------------------------------
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIME = "CONSUME_START_TIME"
"""PROPERTY_CONSUME_START_TIMESTAMP."""
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"

# -- transactions -------------------------------------------------------------
TRAN_MSG = "TRAN_MSG"
"""PROPERTY_TRANSACTION_PREPARED: "true" marks a half message."""
PGROUP = "PGROUP"
"""PROPERTY_PRODUCER_GROUP of a transactional message."""
TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"

# -- set by the broker or client internals ------------------------------------
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
TRANSFER_FLAG = "TRANSFER_FLAG"
CORRECTION_FLAG = "CORRECTION_FLAG"
MQ2_FLAG = "MQ2_FLAG"
MSG_REGION = "MSG_REGION"
TRACE_ON = "TRACE_ON"
"""PROPERTY_TRACE_SWITCH."""
CLUSTER = "CLUSTER"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
DUP_INFO = "DUP_INFO"
POP_CK = "POP_CK"
POP_CK_OFFSET = "POP_CK_OFFSET"
FIRST_POP_TIME = "1ST_POP_TIME"
FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
REDIRECT = "REDIRECT"
CRC32 = "__CRC32#"
"""Prefix of the reserved properties tail when the broker appends a CRC."""
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
"""Properties whose name starts with this are never stored."""

SYSTEM_KEYS: frozenset[str] = frozenset(
    {
        TRACE_ON,
        MSG_REGION,
        KEYS,
        TAGS,
        WAIT,
        DELAY,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QID,
        TRAN_MSG,
        PGROUP,
        MIN_OFFSET,
        MAX_OFFSET,
        BUYER_ID,
        ORIGIN_MESSAGE_ID,
        TRANSFER_FLAG,
        CORRECTION_FLAG,
        MQ2_FLAG,
        RECONSUME_TIME,
        UNIQ_KEY,
        MAX_RECONSUME_TIMES,
        CONSUME_START_TIME,
        POP_CK,
        POP_CK_OFFSET,
        FIRST_POP_TIME,
        TRAN_PREPARED_QUEUE_OFFSET,
        DUP_INFO,
        EXTEND_UNIQ_INFO,
        INSTANCE_ID,
        CORRELATION_ID,
        MESSAGE_REPLY_TO_CLIENT,
        MESSAGE_TTL,
        REPLY_MESSAGE_ARRIVE_TIME,
        PUSH_REPLY_TIME,
        CLUSTER,
        MESSAGE_TYPE,
        INNER_MULTI_QUEUE_OFFSET,
        TIMER_DELAY_MS,
        TIMER_DELAY_SEC,
        TIMER_DELIVER_MS,
        TIMER_ENQUEUE_MS,
        TIMER_DEQUEUE_MS,
        TIMER_ROLL_TIMES,
        TIMER_OUT_MS,
        TIMER_DEL_UNIQKEY,
        TIMER_DELAY_LEVEL,
        BORN_HOST,
        BORN_TIMESTAMP,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
        CRC32,
    }
)
"""Java's `MessageConst.STRING_HASH_SET` (MessageConst.java:108-160): keys a user
may not set as user properties, and the ones the gRPC door keeps out of a
delivered message's `user_properties`. `__SHARDINGKEY`, `__transactionId__`,
TRANSACTION_CHECK_TIMES and `__STARTDELIVERTIME` are not in it."""


def wait_store_msg_ok(value: str | None) -> bool:
    """Whether a message's sender waits for it to be stored durably, from its
    WAIT property's value (None: absent). Java's `Message.isWaitStoreMsgOK`:
    an absent WAIT waits; otherwise `Boolean.parseBoolean`, true only for
    "true" in any letter case, so "false", "FALSE", "no" and "" do not wait."""
    return value is None or value.lower() == "true"


def encode_properties(props: Mapping[str, str]) -> str:
    """`key\\x01value\\x02` for every pair, the separator after the last one too."""
    if not props:
        return ""
    return "".join([f"{key}\x01{value}\x02" for key, value in props.items()])


def decode_properties(s: str) -> dict[str, str]:
    """Parse a property string.

    Items are split on \\x02 and each at its first \\x01, so a value may hold
    \\x01. Items without \\x01, and pairs with an empty key (ali-ons re-sends a
    spurious `\\x01\\x02`), are skipped, as Java's parser does. Unlike Java's
    parser (which drops them) empty values are kept: ali-ons sends `TAGS=""`
    and a tag filter must see it.
    """
    result: dict[str, str] = {}
    if not s:
        return result
    for item in s.split("\x02"):
        key, sep, value = item.partition("\x01")
        if key and sep:
            result[key] = value
    return result


class PropertyView(Mapping[str, str]):
    """A read-only view of an encoded property string that decodes nothing up
    front: `get` finds one name in the raw text, with the same result as
    `decode_properties(raw).get(name)` (the last pair of a name wins; values
    never hold \x02, so "\x02name\x01" can only start a pair). Filters that
    read a few properties of many records (SQL92 pulls) use it."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: str) -> None:
        self._raw = raw
        self._decoded: dict[str, str] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        raw = self._raw
        if not key or "\x01" in key or "\x02" in key:
            return self._all().get(key, default)
        start = raw.rfind(f"\x02{key}\x01")
        if start >= 0:
            start += len(key) + 2
        elif raw.startswith(f"{key}\x01"):
            start = len(key) + 1
        else:
            return default
        end = raw.find("\x02", start)
        return raw[start:] if end < 0 else raw[start:end]

    def __getitem__(self, key: str) -> str:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return str(value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def _all(self) -> dict[str, str]:
        if self._decoded is None:
            self._decoded = decode_properties(self._raw)
        return self._decoded


_MISSING = object()


def encode_properties_bytes(props: Mapping[str, str]) -> bytes:
    """`encode_properties` as UTF-8."""
    return encode_properties(props).encode()


def decode_properties_bytes(raw: bytes | bytearray | memoryview) -> dict[str, str]:
    """`decode_properties` of UTF-8 bytes; UnicodeDecodeError (a ValueError) if not UTF-8."""
    if not raw:
        return {}
    return decode_properties(str(raw, "utf-8"))


def edit_properties(raw: str, updates: Mapping[str, str | None]) -> str:
    """`raw` (an encoded property string) with `updates` applied: every pair
    whose key is in `updates` is dropped, then the non-None updates are
    appended. Other pairs are kept byte for byte, in order."""
    kept: list[str] = []
    for item in raw.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        key, sep, _ = item.partition(NAME_VALUE_SEPARATOR)
        if sep and key in updates:
            continue
        kept.append(item + PROPERTY_SEPARATOR)
    kept.extend(
        f"{key}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"
        for key, value in updates.items()
        if value is not None
    )
    return "".join(kept)
