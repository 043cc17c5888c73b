"""Topic configs: the broker's table of topics, persisted in `config/topics.json`.

File layout (RocketMQ's TopicConfigSerializeWrapper, also the body of
REGISTER_BROKER and GET_ALL_TOPIC_CONFIG)::

    {"topicConfigTable": {"<topic>": {"topicName": "<topic>", "readQueueNums": 4,
       "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
       "topicSysFlag": 0, "order": false}, ...},
     "dataVersion": {"timestamp": <ms>, "counter": <n>}}

Every change bumps the data version (the name server compares it) and is
written at once: temp file + fsync + rename + directory fsync, so a crash
leaves the old or the new file, never a torn one.

Names follow RocketMQ's TopicValidator: `^[%|a-zA-Z0-9_-]+$`, at most 127
characters, and the reserved system topics cannot be created or deleted
through the admin path. System topics made at load: TBW102 (perm 7, the
auto-create template, only when auto-creation is on), SCHEDULE_TOPIC_XXXX
(one queue per delay level), SELF_TEST_TOPIC and OFFSET_MOVED_EVENT (1
queue), the cluster-name and broker-name topics (1 queue, inheritable), and
with `trace_topic` the message-trace topic (1 queue; Java's TopicConfigManager
with traceTopicEnable, which also makes the name a system topic).

RMQ_SYS_TRACE_TOPIC is a system topic that a send may still create from the
template when auto-creation is on (Java's createTopicInSendMessageMethod
refuses no system topic): that is how Java's trace producers get it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tidemq.common.atomic_file import write_json_atomically
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.names import dlq_topic_of, retry_topic_of, validate_topic_name
from tidemq.store.config import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

# -- PermName ---------------------------------------------------------------
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_READ_WRITE = PERM_READ | PERM_WRITE

# -- reserved names (TopicValidator, MixAll) ---------------------------------
AUTO_CREATE_TOPIC_KEY = "TBW102"
SCHEDULE_TOPIC_V2 = "SCHEDULE_TOPIC_XXXX_V2"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY,
        SCHEDULE_TOPIC,
        SCHEDULE_TOPIC_V2,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        SCHEDULE_TOPIC_V2,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"

TOPICS_FILE = "topics.json"


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_readable(perm: int) -> bool:
    return perm & PERM_READ != 0


def is_writeable(perm: int) -> bool:
    return perm & PERM_WRITE != 0


def is_inherited(perm: int) -> bool:
    return perm & PERM_INHERIT != 0


# -- value types ----------------------------------------------------------------


@dataclass(slots=True)
class TopicConfig:
    """RocketMQ's TopicConfig (JSON field names in `to_json`)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5 topic attributes, e.g. {"message.type": "FIFO"}."""

    @property
    def queue_nums(self) -> int:
        """Queue ids below this exist (Java checks max(read, write))."""
        return max(self.read_queue_nums, self.write_queue_nums)

    def to_json(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_json(cls, raw: object, name: str | None = None) -> TopicConfig:
        """Parse one topic config; ValueError with a readable message if malformed."""
        if not isinstance(raw, dict):
            raise ValueError("a topic config must be a JSON object")
        topic = raw.get("topicName", name)
        if not isinstance(topic, str):
            raise ValueError("topicName must be a string")
        return cls(
            topic_name=topic,
            read_queue_nums=_int_field(raw, "readQueueNums", 16),
            write_queue_nums=_int_field(raw, "writeQueueNums", 16),
            perm=_int_field(raw, "perm", PERM_READ_WRITE),
            topic_filter_type=str(raw.get("topicFilterType") or SINGLE_TAG),
            topic_sys_flag=_int_field(raw, "topicSysFlag", 0),
            order=bool(raw.get("order", False)),
            attributes=_attributes(raw.get("attributes")),
        )


def _attributes(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("attributes must be a JSON object")
    return {str(k): str(v) for k, v in raw.items()}


def _int_field(raw: dict[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {value!r}") from None


@dataclass(slots=True)
class DataVersion:
    """RocketMQ's DataVersion: bumped on every change of a config table."""

    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> None:
        self.timestamp = now_ms
        self.counter += 1

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, raw: object) -> DataVersion:
        if not isinstance(raw, dict):
            return cls()
        return cls(int(raw.get("timestamp", 0) or 0), int(raw.get("counter", 0) or 0))


# -- files ------------------------------------------------------------------------

T = TypeVar("T")


def read_json_file(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, None if the file does not exist.

    A file that is not a JSON object raises ValueError naming the file:
    starting with an empty table would silently lose state.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if not text.strip():
        return None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return document


def parse_table(
    path: Path, document: dict[str, Any], key: str, parse: Callable[[Any, str], T], what: str
) -> list[T]:
    """The entries of one JSON table (`topicConfigTable`, `subscriptionGroupTable`),
    each parsed with `parse(raw, name)`; a bad entry raises ValueError naming it."""
    raw_table = document.get(key) or {}
    if not isinstance(raw_table, dict):
        raise ValueError(f"{path}: {key} must be an object")
    entries = []
    for name, raw in raw_table.items():
        try:
            entries.append(parse(raw, name))
        except ValueError as exc:
            raise ValueError(f"{path}: {what} {name!r}: {exc}") from None
    return entries


# -- the manager ------------------------------------------------------------------


class TopicError(Exception):
    """A topic operation was refused; `str()` is the remark for the client."""


class PersistedTable:
    """A config table written whole to one JSON file after each change.

    A change that cannot be written (a full disk) stays in memory, logged
    once, and `unsaved` tells the broker's periodic persist to write it: the
    request that made the change does not fail for it."""

    path: Path
    unsaved: bool = False

    def serialize(self) -> dict[str, Any]:
        raise NotImplementedError

    def persist(self) -> None:
        write_json_atomically(self.path, self.serialize())
        self.unsaved = False

    def _persist_or_defer(self) -> None:
        try:
            self.persist()
        except OSError as exc:
            if not self.unsaved:
                log.warning("cannot write %s (%s); it is written again later", self.path, exc)
            self.unsaved = True


class TopicConfigManager(PersistedTable):
    """The broker's topic table. Not thread-safe: use from the event loop.

    `on_change` is called after every change that the name servers should
    hear about (the broker then registers at once instead of in 30 s).
    """

    def __init__(
        self,
        config_dir: Path,
        *,
        broker_name: str = "broker-a",
        cluster_name: str = "DefaultCluster",
        auto_create_topic: bool = True,
        default_topic_queue_nums: int = 4,
        schedule_queue_nums: int = 18,
        clock: Clock = SYSTEM_CLOCK,
        on_change: Callable[[], None] | None = None,
        trace_topic: str | None = None,
    ) -> None:
        self.path = config_dir / TOPICS_FILE
        self.unsaved = False
        """A change could not be written (a full disk): `persist` is due."""
        self.broker_name = broker_name
        self.cluster_name = cluster_name
        self.auto_create_topic = auto_create_topic
        self.default_topic_queue_nums = max(1, default_topic_queue_nums)
        self.schedule_queue_nums = schedule_queue_nums
        self.trace_topic = trace_topic
        """The message-trace topic made at load (trace_topic_enable), or None."""
        self.clock = clock
        self.on_change = on_change
        self.data_version = DataVersion()
        self._table: dict[str, TopicConfig] = {}

    # -- lifecycle ------------------------------------------------------------

    def load(self) -> None:
        """Read topics.json (if any) and add the system topics that are missing."""
        document = read_json_file(self.path)
        if document is not None:
            for config in parse_table(
                self.path, document, "topicConfigTable", TopicConfig.from_json, "topic"
            ):
                self._table[config.topic_name] = config
            self.data_version = DataVersion.from_json(document.get("dataVersion"))
        changed = False
        for config in self._system_topics():
            if config.topic_name not in self._table:
                self._table[config.topic_name] = config
                changed = True
        if changed or document is None:
            self.data_version.next_version(self.clock.now_ms())
            self.persist()

    def _system_topics(self) -> list[TopicConfig]:
        topics = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, self.schedule_queue_nums, self.schedule_queue_nums),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(self.cluster_name, 16, 16, PERM_INHERIT | PERM_READ_WRITE),
            TopicConfig(self.broker_name, 1, 1, PERM_INHERIT | PERM_READ_WRITE),
        ]
        if self.auto_create_topic:
            nums = self.default_topic_queue_nums
            topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY, nums, nums, PERM_INHERIT | 6))
        if self.trace_topic is not None:
            topics.append(TopicConfig(self.trace_topic, 1, 1))
        return topics

    def is_system(self, topic: str) -> bool:
        """A reserved topic of this broker: the system topics, its cluster and
        broker names, and its trace topic."""
        return is_system_topic(topic) or topic in (
            self.cluster_name,
            self.broker_name,
            self.trace_topic,
        )

    def serialize(self) -> dict[str, Any]:
        """The TopicConfigSerializeWrapper JSON (file, registration, admin)."""
        return {
            "topicConfigTable": {name: c.to_json() for name, c in sorted(self._table.items())},
            "dataVersion": self.data_version.to_json(),
        }

    # -- reads ----------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def __contains__(self, topic: object) -> bool:
        return topic in self._table

    def __iter__(self) -> Iterator[TopicConfig]:
        return iter(list(self._table.values()))

    def __len__(self) -> int:
        return len(self._table)

    def names(self) -> list[str]:
        return sorted(self._table)

    # -- changes ----------------------------------------------------------------

    def adopt(self, configs: Iterable[TopicConfig], version: DataVersion) -> bool:
        """A slave takes its master's table whole when the master's data
        version differs from its own (SlaveSynchronize.syncTopicConfig);
        True when it did."""
        if version == self.data_version:
            return False
        self._table = {config.topic_name: config for config in configs}
        self.data_version = DataVersion(version.timestamp, version.counter)
        self._persist_or_defer()
        return True

    def _changed(self) -> None:
        self.data_version.next_version(self.clock.now_ms())
        self._persist_or_defer()
        if self.on_change is not None:
            self.on_change()

    def update(self, config: TopicConfig, *, allow_system: bool = False) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC); TopicError if refused."""
        problem = validate_topic_name(config.topic_name)
        if problem is not None:
            raise TopicError(problem)
        if not allow_system and self.is_system(config.topic_name):
            raise TopicError(f"The topic[{config.topic_name}] is conflict with system topic.")
        if config.read_queue_nums < 0 or config.write_queue_nums < 0:
            raise TopicError("queue numbers must not be negative")
        if config.queue_nums > 1024:
            raise TopicError("a topic has at most 1024 queues on one broker")
        if config.topic_filter_type not in (SINGLE_TAG, MULTI_TAG):
            raise TopicError(f"unknown topic filter type {config.topic_filter_type!r}")
        self._table[config.topic_name] = config
        log.info("topic %s updated: %s", config.topic_name, config.to_json())
        self._changed()
        return config

    def delete(self, topic: str) -> bool:
        """Remove a topic's config (DELETE_TOPIC_IN_BROKER); False if it was unknown."""
        if self.is_system(topic):
            raise TopicError(f"The topic[{topic}] is a system topic and cannot be deleted.")
        if self._table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed()
        return True

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create `topic` from the template `default_topic` (Java's
        createTopicInSendMessageMethod): the template must exist and be
        inheritable; the new topic gets min(client's, template's) queues and
        the template's perm without INHERIT. None when not allowed."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        if validate_topic_name(topic) is not None:
            return None
        if is_system_topic(topic) and topic != TRACE_TOPIC:
            return None
        template = self._table.get(default_topic)
        if template is None or not is_inherited(template.perm):
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY and not self.auto_create_topic:
            return None
        queue_nums = max(1, min(client_queue_nums, template.write_queue_nums))
        config = TopicConfig(
            topic,
            queue_nums,
            queue_nums,
            template.perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
        )
        self._table[topic] = config
        log.info("topic %s auto-created from %s: %s", topic, default_topic, config.to_json())
        self._changed()
        return config

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Create a retry or DLQ topic if missing (createTopicInSendMessageBackMethod)."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        if validate_topic_name(topic) is not None:
            return None
        config = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self._table[topic] = config
        log.info("topic %s created: %s", topic, config.to_json())
        self._changed()
        return config

    def ensure_retry_topic(self, group: str, queue_nums: int = 1) -> TopicConfig | None:
        """`%RETRY%<group>`: 1 read/1 write queue, perm 6 (created on heartbeat and send-back)."""
        return self.create_in_send_back(retry_topic_of(group), queue_nums, PERM_READ_WRITE)

    def ensure_dlq_topic(self, group: str) -> TopicConfig | None:
        """`%DLQ%<group>`: 1 queue, perm 6 (read and write).

        Readable, as in RocketMQ since apache/rocketmq#2437 (its
        AbstractSendMessageProcessor and SendMessageProcessor create the DLQ
        with PERM_WRITE | PERM_READ): older 4.x brokers made it write-only
        (perm 2), so it had to be made readable before anyone could read it.
        `tidemq topic update %DLQ%G --perm 2` restores that, if wanted.
        """
        return self.create_in_send_back(dlq_topic_of(group), 1, PERM_READ_WRITE)
