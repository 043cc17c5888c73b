"""Message value types: what a producer sends, what the store returns, and
the queue a message lives in. Pure data, no I/O.

Tags, keys, delay level and the client id are not fields: as in RocketMQ they
live in `properties` (that is all the wire carries), and the accessors below
read and write those properties.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemq.common import properties as props

MAX_MESSAGE_SIZE = 4 * 1024 * 1024
"""The largest message (body plus encoded properties) by default, on both
sides: Java's DefaultMQProducer.maxMessageSize and the broker's
MessageStoreConfig.maxMessageSize are both 4 MiB."""


@dataclass(slots=True)
class Message:
    topic: str
    body: bytes = b""
    flag: int = 0
    """The user flag (send header `flag`), stored untouched."""
    properties: dict[str, str] = field(default_factory=dict)

    # -- generic property access ------------------------------------------

    def get_property(self, key: str, default: str | None = None) -> str | None:
        return self.properties.get(key, default)

    def put_property(self, key: str, value: str) -> None:
        self.properties[key] = value

    def remove_property(self, key: str) -> None:
        self.properties.pop(key, None)

    # -- well-known properties ----------------------------------------------

    @property
    def tags(self) -> str | None:
        return self.properties.get(props.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set_or_remove(props.TAGS, value)

    @property
    def keys(self) -> list[str]:
        """The KEYS value split on spaces (empty items dropped)."""
        raw = self.properties.get(props.KEYS, "")
        return [key for key in raw.split(props.KEY_SEPARATOR) if key]

    @keys.setter
    def keys(self, value: str | Iterable[str]) -> None:
        joined = value if isinstance(value, str) else props.KEY_SEPARATOR.join(value)
        self._set_or_remove(props.KEYS, joined.strip() or None)

    @property
    def delay_level(self) -> int:
        """The DELAY level, 0 when absent; ValueError if it is not an integer (as Java)."""
        raw = self.properties.get(props.DELAY)
        return int(raw) if raw else 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self.properties[props.DELAY] = str(level)

    @property
    def unique_key(self) -> str | None:
        """The client-generated id (UNIQ_KEY), if the producer set one."""
        return self.properties.get(props.UNIQ_KEY)

    @unique_key.setter
    def unique_key(self, value: str | None) -> None:
        self._set_or_remove(props.UNIQ_KEY, value)

    @property
    def wait_store_msg_ok(self) -> bool:
        """Whether the broker answers only once the message is durable (flushed
        in sync-flush mode, on a slave for a SYNC_MASTER): absent WAIT or
        "true" in any case, as Java's `isWaitStoreMsgOK` reads it."""
        return props.wait_store_msg_ok(self.properties.get(props.WAIT))

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[props.WAIT] = "true" if value else "false"

    def _set_or_remove(self, key: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = value


@dataclass(slots=True, kw_only=True)
class MessageExt(Message):
    """A stored message: the producer's message plus what the broker recorded."""

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    """"ip:port" ("[v6]:port" for IPv6) of the producer."""
    store_timestamp: int = 0
    store_host: str = ""
    """"ip:port" ("[v6]:port" for IPv6) of the broker that stored it."""
    msg_id: str = ""
    """The offset message id: store host + port + commit log offset."""
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker; sorts like Java's compareTo."""

    topic: str
    broker_name: str
    queue_id: int
