"""The name server's route table: which brokers are alive and which topics they serve.

Pure state, no I/O; time comes from an injected Clock. The model follows
RocketMQ's ``RouteInfoManager``:

* A **broker** is one process, identified by its address ``"host:port"``. It
  belongs to a broker group (``broker_name``) inside a cluster and holds one
  slot of that group: id 0 is the master, ids > 0 are slaves. Each slot and
  each address belong to exactly one live broker: registering an address under
  another slot moves it (a promoted slave), registering a slot from another
  address takes the slot over.
* **Topics** are known per broker group, from the topic configs its master
  registers (slaves' configs are ignored, as in Java). Registrations merge:
  each config given adds or updates that group's queue data for the topic;
  topics missing from a registration are left alone (Java's incremental
  registration sends only new topics). Unlike Java, configs are applied on
  every registration, not only when the broker's dataVersion changed, so a
  broker that never bumps its version is still reflected.
* A broker leaves when it unregisters, when its connection closes
  (``remove_channel``) or when it has not registered for 120 s (``expire``;
  Java scans every 10 s). When the last broker of a group leaves, the group
  and its queue data go; a topic no live group serves disappears from routes.
* ``delete_topic`` forgets a topic (for one cluster's groups, or everywhere)
  until some master registers it again.
* ``wipe_write_perm`` takes the write permission off every topic of a broker
  group in the routes (mqadmin wipeWritePerm: producers go elsewhere while
  consumers drain it), ``add_write_perm`` gives it back. Java edits the queue
  data, which its next registration leaves alone unless the broker's
  dataVersion moved; here registrations are applied every time, so the wipe
  is a mark on the group that routes apply, and it lasts until the group's
  master registers into an empty slot (a restarted master, as Java's
  registerFirst restores the broker's own permissions) or the group goes. Add
  gives back each topic's registered permission; Java sets read+write, which
  would make a read-only topic writable.

``route(topic)`` returns the TopicRouteData JSON object clients expect
(protocol-remoting.md §2.3), ``cluster_info()`` Java's ClusterInfo and
``all_topics()`` the TopicList's names. Output lists are sorted so equal
states give byte-identical JSON.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from tidemq.common.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "BROKER_EXPIRY_MS",
    "MASTER_ID",
    "BrokerDataJSON",
    "BrokerRecord",
    "ClusterInfoJSON",
    "QueueData",
    "QueueDataJSON",
    "RegisterResult",
    "RouteTable",
    "TopicRouteJSON",
    "parse_topic_config_table",
]

BROKER_EXPIRY_MS = 120_000
"""A broker silent for longer than this is removed (Java BROKER_CHANNEL_EXPIRED_TIME)."""
MASTER_ID = 0

_INT32_MAX = 2**31 - 1
_PERM_WRITE = 2
"""PermName.PERM_WRITE."""


class QueueDataJSON(TypedDict):
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int


class BrokerDataJSON(TypedDict):
    cluster: str
    brokerName: str
    brokerAddrs: dict[str, str]
    """brokerId (as a decimal string, "0" = master) -> "host:port"."""


class TopicRouteJSON(TypedDict):
    orderTopicConf: str | None
    queueDatas: list[QueueDataJSON]
    brokerDatas: list[BrokerDataJSON]
    filterServerTable: dict[str, list[str]]


class ClusterInfoJSON(TypedDict):
    brokerAddrTable: dict[str, BrokerDataJSON]
    clusterAddrTable: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker group's queues of one topic."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """A live broker as last registered."""

    cluster: str
    broker_name: str
    broker_addr: str
    broker_id: int
    ha_server_addr: str
    last_update_ms: int
    channel: Hashable | None = None
    data_version: object = None


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a registering slave learns about its master (both None for a master)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class _Group:
    cluster: str
    addrs: dict[int, str]


def parse_topic_config_table(table: Mapping[str, object]) -> dict[str, QueueData]:
    """Topic configs as a broker registers them -> queue data per topic; ValueError if malformed.

    Each value is a TopicConfig JSON object: ``topicName`` (defaults to the
    key), ``readQueueNums``, ``writeQueueNums``, ``perm`` and optional
    ``topicSysFlag``; other fields (``order``, ``topicFilterType``,
    ``attributes``) are ignored.
    """
    parsed: dict[str, QueueData] = {}
    for key, config in table.items():
        if not isinstance(config, Mapping):
            raise ValueError(f"topic config for {key!r} must be an object")
        name = config.get("topicName", key)
        if not isinstance(name, str) or not name:
            raise ValueError(f"topic config for {key!r} has a bad topicName {name!r}")
        parsed[name] = QueueData(
            read_queue_nums=_config_int(config, name, "readQueueNums", None),
            write_queue_nums=_config_int(config, name, "writeQueueNums", None),
            perm=_config_int(config, name, "perm", None),
            topic_sys_flag=_config_int(config, name, "topicSysFlag", 0),
        )
    return parsed


def _config_int(config: Mapping[str, object], topic: str, key: str, default: int | None) -> int:
    value = config.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"topic config for {topic!r} lacks {key}")
        return default
    if type(value) is not int or not 0 <= value <= _INT32_MAX:
        raise ValueError(f"topic config for {topic!r} has a bad {key}: {value!r}")
    return value


class RouteTable:
    """Live brokers, their groups and clusters, and the queue data of every topic."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, expiry_ms: int = BROKER_EXPIRY_MS) -> None:
        self._clock = clock
        self._expiry_ms = expiry_ms
        self._live: dict[str, BrokerRecord] = {}
        self._groups: dict[str, _Group] = {}
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._write_wiped: set[str] = set()
        """Broker groups whose write permission was wiped."""

    @property
    def expiry_ms(self) -> int:
        return self._expiry_ms

    # --- changes -----------------------------------------------------------------

    def register(
        self,
        *,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        ha_server_addr: str = "",
        topic_configs: Mapping[str, object] | None = None,
        data_version: object = None,
        channel: Hashable | None = None,
    ) -> RegisterResult:
        """Add or refresh a broker; a master's topic configs update its group's queue data."""
        for what, text in (
            ("cluster name", cluster),
            ("broker name", broker_name),
            ("broker address", broker_addr),
        ):
            if not text:
                raise ValueError(f"{what} must not be empty")
        if broker_id < 0:
            raise ValueError(f"broker id must not be negative, got {broker_id}")
        topics = parse_topic_config_table(topic_configs) if topic_configs is not None else {}

        previous = self._live.pop(broker_addr, None)
        if previous is not None and (previous.broker_name, previous.broker_id) != (
            broker_name,
            broker_id,
        ):
            # The address moves to another slot; its old group may be left empty.
            self._release_slot(previous, drop_empty_group=previous.broker_name != broker_name)
        group = self._groups.get(broker_name)
        if group is None:
            group = self._groups[broker_name] = _Group(cluster, {})
        holder = group.addrs.get(broker_id)
        if broker_id == MASTER_ID and holder is None:
            self._write_wiped.discard(broker_name)  # a master (re)starting: its own perms
        if holder is not None and holder != broker_addr:
            self._live.pop(holder, None)  # the slot is taken over by a new address
        group.cluster = cluster
        group.addrs[broker_id] = broker_addr
        self._live[broker_addr] = BrokerRecord(
            cluster=cluster,
            broker_name=broker_name,
            broker_addr=broker_addr,
            broker_id=broker_id,
            ha_server_addr=ha_server_addr,
            last_update_ms=self._clock.now_ms(),
            channel=channel,
            data_version=data_version,
        )
        if broker_id == MASTER_ID:
            for topic, queue_data in topics.items():
                self._topics.setdefault(topic, {})[broker_name] = queue_data
            return RegisterResult()
        master_addr = group.addrs.get(MASTER_ID)
        master = self._live.get(master_addr) if master_addr is not None else None
        if master is None:
            return RegisterResult()
        return RegisterResult(ha_server_addr=master.ha_server_addr, master_addr=master_addr)

    def unregister(self, broker_addr: str) -> BrokerRecord | None:
        """Remove the broker at ``broker_addr`` (it shuts down); return it if it was live."""
        if broker_addr not in self._live:
            return None
        return self._drop(broker_addr)

    def expire(self, now_ms: int | None = None) -> list[BrokerRecord]:
        """Remove brokers that have not registered for longer than the expiry; return them."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        stale = [
            addr
            for addr, record in self._live.items()
            if record.last_update_ms + self._expiry_ms < now
        ]
        return [self._drop(addr) for addr in stale]

    def remove_channel(self, channel: Hashable) -> list[BrokerRecord]:
        """Remove every broker that registered over ``channel`` (its connection closed)."""
        gone = [addr for addr, record in self._live.items() if record.channel == channel]
        return [self._drop(addr) for addr in gone]

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget ``topic`` (only its queues on ``cluster``'s groups if given); True if known."""
        entries = self._topics.get(topic)
        if entries is None:
            return False
        if cluster is None:
            del self._topics[topic]
            return True
        names = [name for name in entries if self._groups[name].cluster == cluster]
        for name in names:
            del entries[name]
        if not entries:
            del self._topics[topic]
        return bool(names)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Routes stop offering `broker_name` for writes; how many topics it serves."""
        count = self._topic_count(broker_name)
        if broker_name in self._groups:
            self._write_wiped.add(broker_name)
        return count

    def add_write_perm(self, broker_name: str) -> int:
        """Undo `wipe_write_perm`; how many topics `broker_name` serves."""
        self._write_wiped.discard(broker_name)
        return self._topic_count(broker_name)

    def write_wiped(self, broker_name: str) -> bool:
        return broker_name in self._write_wiped

    # --- views -------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteJSON | None:
        """The TopicRouteData JSON object for ``topic``, or None if no live group serves it."""
        entries = self._topics.get(topic)
        if not entries:
            return None
        names = sorted(entries)
        queue_datas: list[QueueDataJSON] = [
            {
                "brokerName": name,
                "readQueueNums": entries[name].read_queue_nums,
                "writeQueueNums": entries[name].write_queue_nums,
                "perm": self._perm(name, entries[name]),
                "topicSysFlag": entries[name].topic_sys_flag,
            }
            for name in names
        ]
        return {
            "orderTopicConf": None,
            "queueDatas": queue_datas,
            "brokerDatas": [self._broker_data(name) for name in names],
            "filterServerTable": {},
        }

    def cluster_info(self) -> ClusterInfoJSON:
        """Java's ClusterInfo: every broker group, and the group names of every cluster."""
        clusters: dict[str, list[str]] = {}
        for name in sorted(self._groups):
            clusters.setdefault(self._groups[name].cluster, []).append(name)
        return {
            "brokerAddrTable": {name: self._broker_data(name) for name in sorted(self._groups)},
            "clusterAddrTable": {cluster: clusters[cluster] for cluster in sorted(clusters)},
        }

    def all_topics(self) -> list[str]:
        return sorted(self._topics)

    def brokers(self) -> list[BrokerRecord]:
        """Every live broker, by address."""
        return [self._live[addr] for addr in sorted(self._live)]

    def broker(self, broker_addr: str) -> BrokerRecord | None:
        return self._live.get(broker_addr)

    # --- internals -----------------------------------------------------------------

    def _perm(self, broker_name: str, queue_data: QueueData) -> int:
        if broker_name in self._write_wiped:
            return queue_data.perm & ~_PERM_WRITE
        return queue_data.perm

    def _topic_count(self, broker_name: str) -> int:
        return sum(1 for entries in self._topics.values() if broker_name in entries)

    def _broker_data(self, name: str) -> BrokerDataJSON:
        group = self._groups[name]
        return {
            "cluster": group.cluster,
            "brokerName": name,
            "brokerAddrs": {
                str(broker_id): group.addrs[broker_id] for broker_id in sorted(group.addrs)
            },
        }

    def _drop(self, broker_addr: str) -> BrokerRecord:
        record = self._live.pop(broker_addr)
        self._release_slot(record, drop_empty_group=True)
        return record

    def _release_slot(self, record: BrokerRecord, *, drop_empty_group: bool) -> None:
        group = self._groups.get(record.broker_name)
        if group is None:
            return
        if group.addrs.get(record.broker_id) == record.broker_addr:
            del group.addrs[record.broker_id]
        if drop_empty_group and not group.addrs:
            del self._groups[record.broker_name]
            self._write_wiped.discard(record.broker_name)
            self._forget_group_topics(record.broker_name)

    def _forget_group_topics(self, name: str) -> None:
        for topic in [t for t, entries in self._topics.items() if name in entries]:
            entries = self._topics[topic]
            del entries[name]
            if not entries:
                del self._topics[topic]
