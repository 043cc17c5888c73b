"""What the admin client returns: routes, cluster info, queue figures, send
results, with the RocketMQ JSON they are read from (TopicRouteData,
ClusterInfo, BrokerData, QueueData, SubscriptionGroupConfig)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidemq.client._wire import as_int
from tidemq.common.message import MessageQueue

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
"""Only the TBW102 template route carries it: topics may be created from it."""


def perm_text(perm: int) -> str:
    """Permission bits as Java's PermName.perm2String shows them: 6 -> "RW-"."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    addrs: dict[int, str]
    """broker id -> "host:port"; id 0 is the master."""

    @property
    def master(self) -> str | None:
        return self.addrs.get(MASTER_ID)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.addrs.items())},
        }


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """TopicRouteData: which brokers serve a topic with how many queues."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]

    @classmethod
    def from_json(cls, topic: str, document: Mapping[str, Any]) -> TopicRoute:
        """TopicRouteData as the name server sends it, sorted by broker name."""
        return cls(
            topic=topic,
            queue_datas=tuple(
                sorted(
                    (queue_data_from_json(q) for q in document.get("queueDatas") or []),
                    key=lambda q: q.broker_name,
                )
            ),
            broker_datas=tuple(
                sorted(
                    (broker_data_from_json(b) for b in document.get("brokerDatas") or []),
                    key=lambda b: b.broker_name,
                )
            ),
        )

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def masters(self) -> dict[str, str]:
        """broker name -> master address, for every broker holding queues of the topic."""
        result: dict[str, str] = {}
        for queue_data in self.queue_datas:
            broker = self.broker(queue_data.broker_name)
            if broker is not None and broker.master is not None:
                result[queue_data.broker_name] = broker.master
        return dict(sorted(result.items()))

    def write_queues(self) -> list[MessageQueue]:
        """Writable queues on brokers with a master, as a Java producer lists them."""
        masters = self.masters()
        return sorted(
            MessageQueue(self.topic, q.broker_name, queue_id)
            for q in self.queue_datas
            if q.perm & PERM_WRITE and q.broker_name in masters
            for queue_id in range(q.write_queue_nums)
        )

    def read_queues(self) -> list[MessageQueue]:
        """Readable queues, as a Java consumer lists them."""
        return sorted(
            MessageQueue(self.topic, q.broker_name, queue_id)
            for q in self.queue_datas
            if q.perm & PERM_READ
            for queue_id in range(q.read_queue_nums)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "queueDatas": [q.to_json() for q in self.queue_datas],
            "brokerDatas": [b.to_json() for b in self.broker_datas],
        }


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    brokers: dict[str, BrokerData]
    """broker name -> its addresses (brokerAddrTable)."""
    clusters: dict[str, tuple[str, ...]]
    """cluster name -> broker names (clusterAddrTable)."""

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> master address, of one cluster or of all."""
        if cluster is None:
            names: Iterable[str] = self.brokers
        else:
            names = self.clusters.get(cluster, ())
        result = {}
        for name in names:
            broker = self.brokers.get(name)
            if broker is not None and broker.master is not None:
                result[name] = broker.master
        return dict(sorted(result.items()))


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue of TopicStatsTable."""

    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """One queue of ConsumeStats (OffsetWrapper)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        """Messages stored but not yet consumed (consumer offset < 0 counts as 0)."""
        return max(0, self.broker_offset - max(0, self.consumer_offset))


@dataclass(frozen=True, slots=True)
class QueueOffset:
    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A subscription group as one broker knows it (SubscriptionGroupConfig)."""

    group_name: str
    broker_name: str
    config: dict[str, Any]

    def settings(self) -> dict[str, Any]:
        return group_settings(self.config)


def group_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a group list shows, by readable names (None where not set)."""
    return {
        "consume_enable": config.get("consumeEnable"),
        "broadcast": config.get("consumeBroadcastEnable"),
        "orderly": config.get("consumeMessageOrderly"),
        "retry_max_times": config.get("retryMaxTimes"),
        "broker_id": config.get("brokerId"),
        "which_broker_when_consume_slowly": config.get("whichBrokerWhenConsumeSlowly"),
    }


class SendStatus(enum.StrEnum):
    """How the broker stored a sent message (Java's SendStatus).

    A `str`, so code written against the strings keeps working:
    `result.status == "SEND_OK"` holds for `SendStatus.SEND_OK`.
    """

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    """Stored, but not flushed to disk in time (SYNC_FLUSH brokers)."""
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """Stored on the master, not replicated to the slave in time (SYNC_MASTER)."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """Stored on the master; no slave to replicate to (SYNC_MASTER)."""

    def __repr__(self) -> str:
        # printed SendResults show `status=SendStatus.SEND_OK`, not the enum's <...: '...'>
        return f"{type(self).__name__}.{self.name}"


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str
    """The client id (UNIQ_KEY), what Java's SendResult.getMsgId() returns."""
    offset_msg_id: str
    """The broker's id (store host + commit log offset); view_by_id takes it."""
    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    """A half message's transaction id (transactional sends only)."""
    recall_handle: str | None = None
    """Pass to `recall` to cancel a timer message before it is due."""
    region_id: str | None = None
    """The broker's region (MSG_REGION of the answer), for message traces."""
    trace_on: bool = True
    """False when the broker asks clients not to trace (TRACE_ON=false)."""


def broker_data_from_json(raw: Mapping[str, Any]) -> BrokerData:
    addrs = raw.get("brokerAddrs") or {}
    return BrokerData(
        cluster=str(raw.get("cluster") or ""),
        broker_name=str(raw.get("brokerName") or ""),
        addrs={as_int(k, -1): str(v) for k, v in addrs.items()} if isinstance(addrs, dict) else {},
    )


def queue_data_from_json(raw: Mapping[str, Any]) -> QueueData:
    return QueueData(
        broker_name=str(raw.get("brokerName") or ""),
        read_queue_nums=as_int(raw.get("readQueueNums")),
        write_queue_nums=as_int(raw.get("writeQueueNums")),
        perm=as_int(raw.get("perm")),
        topic_sys_flag=as_int(raw.get("topicSysFlag", raw.get("topicSynFlag"))),
    )


def group_config_json(
    name: str,
    *,
    retry_max_times: int,
    broadcast: bool,
    orderly: bool,
    from_min: bool,
    broker_id: int = MASTER_ID,
    which_broker_when_consume_slowly: int = 1,
) -> dict[str, Any]:
    """A SubscriptionGroupConfig body with Java's defaults for the rest."""
    return {
        "groupName": name,
        "consumeEnable": True,
        "consumeFromMinEnable": from_min,
        "consumeBroadcastEnable": broadcast,
        "consumeMessageOrderly": orderly,
        "retryQueueNums": 1,
        "retryMaxTimes": retry_max_times,
        "brokerId": broker_id,
        "whichBrokerWhenConsumeSlowly": which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": True,
        "groupSysFlag": 0,
        "consumeTimeoutMinute": 15,
        "attributes": {},
    }


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """One client of a group as a broker sees it (Java's Connection)."""

    client_id: str
    address: str
    language: str
    version: int
    """The client's version number (Java's MQVersion ordinal, as the client sent it)."""
    broker_name: str
    """The broker that reported it (a client is connected to several)."""


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """The online consumers of a group and what they subscribe (ConsumerConnection),
    merged over the brokers that know them."""

    connections: tuple[ClientConnection, ...]
    subscriptions: dict[str, str]
    """topic -> subscription expression (tags or SQL92)."""
    expression_types: dict[str, str]
    """topic -> "TAG" or "SQL92"."""
    consume_type: str
    message_model: str
    consume_from_where: str

    def to_json(self) -> dict[str, Any]:
        return {
            "connections": [
                {
                    "client_id": c.client_id,
                    "address": c.address,
                    "language": c.language,
                    "version": c.version,
                    "broker": c.broker_name,
                }
                for c in self.connections
            ],
            "subscriptions": [
                {"topic": t, "expression": e, "type": self.expression_types.get(t, "TAG")}
                for t, e in sorted(self.subscriptions.items())
            ],
            "consume_type": self.consume_type,
            "message_model": self.message_model,
            "consume_from_where": self.consume_from_where,
        }


def merge_consumer_connections(documents: Mapping[str, Mapping[str, Any]]) -> ConsumerConnection:
    """Broker name -> ConsumerConnection JSON, merged: every client once (by
    client id, the first broker's view), every subscription."""
    clients: dict[str, ClientConnection] = {}
    subscriptions: dict[str, str] = {}
    kinds: dict[str, str] = {}
    consume_type = message_model = from_where = ""
    for broker, document in sorted(documents.items()):
        for raw in document.get("connectionSet") or ():
            if not isinstance(raw, Mapping):
                continue
            client_id = str(raw.get("clientId") or "")
            clients.setdefault(
                client_id,
                ClientConnection(
                    client_id,
                    str(raw.get("clientAddr") or ""),
                    str(raw.get("language") or ""),
                    as_int(raw.get("version")),
                    broker,
                ),
            )
        table = document.get("subscriptionTable") or {}
        for topic, data in table.items() if isinstance(table, Mapping) else ():
            data = data if isinstance(data, Mapping) else {}
            subscriptions[str(topic)] = str(data.get("subString") or "*")
            kinds[str(topic)] = str(data.get("expressionType") or "TAG")
        consume_type = consume_type or str(document.get("consumeType") or "")
        message_model = message_model or str(document.get("messageModel") or "")
        from_where = from_where or str(document.get("consumeFromWhere") or "")
    return ConsumerConnection(
        tuple(sorted(clients.values(), key=lambda c: c.client_id)),
        subscriptions,
        kinds,
        consume_type,
        message_model,
        from_where,
    )
