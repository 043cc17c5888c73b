"""AdminClient: administer a tidemq (or RocketMQ 4.x/5.x) cluster over remoting.

What each call sends follows Apache RocketMQ's `MQClientAPIImpl` and
`MQAdminImpl` (rocketmq-all 4.9.7 / 5.x): the same request codes, header
field names and JSON bodies, so the client also works against a Java name
server and broker.

    call                 request(s)                                   to
    topic_route          105 GET_ROUTEINFO_BY_TOPIC                   name server
    cluster_info         106 GET_BROKER_CLUSTER_INFO                  name server
    all_topics           206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER       name server
    create_topic         17 UPDATE_AND_CREATE_TOPIC                   every master of the cluster
    update_topic         21 GET_ALL_TOPIC_CONFIG, then 17             masters serving the topic
    delete_topic         215 DELETE_TOPIC_IN_BROKER, 216 ..._NAMESRV  masters, then name servers
    topic_status         202 GET_TOPIC_STATS_INFO                     masters serving the topic
    create_group         200 UPDATE_AND_CREATE_SUBSCRIPTIONGROUP      every master of the cluster
    list_groups          201 GET_ALL_SUBSCRIPTIONGROUP_CONFIG         every master
    consumer_progress    208 GET_CONSUME_STATS                        masters
    send                 310 SEND_MESSAGE_V2                          master of a round-robin queue
    tail                 30 GET_MAX_OFFSET / 14 QUERY_CONSUMER_OFFSET, 11 PULL_MESSAGE (long
                         polling), 15 UPDATE_CONSUMER_OFFSET when a group is given
    find_by_key          12 QUERY_MESSAGE, paged (_key_query.py)      masters serving the topic
    view_by_id           33 VIEW_MESSAGE_BY_ID                        the broker named in the id
    reset_offset         222 INVOKE_BROKER_TO_RESET_OFFSET            masters serving the topic
    reset_offset_to      222 with queueId and offset, once per queue  masters serving the topic
    topic_message_type   21 GET_ALL_TOPIC_CONFIG                      masters serving the topic
    broker_runtime_stats 28 GET_BROKER_RUNTIME_INFO                   one broker
    all_topic_configs    21 GET_ALL_TOPIC_CONFIG                      every master
    consumer_connection  203 GET_CONSUMER_CONNECTION_LIST             every master
    messages_between     29 SEARCH_OFFSET_BY_TIMESTAMP, 11 PULL_MESSAGE masters serving the topic
                         (_time_range.py)
    resend_dead_letter   view/query the dead letter, then 310 to     master of a retry queue
                         %RETRY%<group> (_dead_letter.py)

Name-server calls try each configured name server in turn until one answers;
one that answers REQUEST_CODE_NOT_SUPPORTED is asked what it is (_peer.py), so
that a broker given as the name server is named as such.
Every failure surfaces as one AdminError carrying a readable one-line message
and a code: the response code and first remark line a server sent, or a
client-side code (ResponseCode.RPC_*) when no answer came.

The result types live in tidemq.client.model, the tail machinery in
_tail.py, the lenient (fastjson) JSON reading and extra headers in _wire.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from tidemq.acl.credentials import Credentials
from tidemq.client._base import AsyncClient
from tidemq.client._dead_letter import dead_letter_group, retry_copy
from tidemq.client._key_query import PAGE_SIZE, KeyQueryResult, Page, merge, search_pages
from tidemq.client._peer import not_a_name_server
from tidemq.client._recall import recall_answer, recall_request
from tidemq.client._send import (
    DEFAULT_TOPIC_QUEUE_NUMS,
    SendCodec,
    make_message,
    route_from_template,
    send_result,
)
from tidemq.client._tail import TOOLS_CONSUMER_GROUP, Tail, TailSpec
from tidemq.client._time_range import TimeRangeResult, messages_between
from tidemq.client._wire import (
    AdminError,
    as_int,
    attributes_text,
    call,
    check,
    decode_body,
    decode_messages,
    first_answer,
    loads_lenient,
    message_queue_key,
    parse_address_list,
    remark,
)
from tidemq.client.errors import ClientError
from tidemq.client.model import (
    MASTER_ID,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    ClientConnection,
    ClusterInfo,
    ConsumerConnection,
    GroupConfig,
    QueueData,
    QueueOffset,
    QueueProgress,
    QueueStatus,
    SendResult,
    TopicRoute,
    broker_data_from_json,
    group_config_json,
    merge_consumer_connections,
)
from tidemq.client.timing import DeliverAfter, DeliverAt
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.common.message_id import (
    UniqueIdGenerator,
    decode_offset_message_id,
    offset_message_id_address,
)
from tidemq.common.tags import SUB_ALL, java_trim, parse_tag_expression
from tidemq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.admin_headers import (
    ConsumeMessageDirectlyRequestHeader,
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    ProducerGroupRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from tidemq.protocol.headers import (
    QUERY_BELOW_OFFSET,
    BrokerWritePermRequestHeader,
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetRouteInfoRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
    encode_header,
)
from tidemq.protocol.java_properties import java_properties_text, parse_java_properties
from tidemq.record.codec import decode_record
from tidemq.transport.client import RemotingClient
from tidemq.transport.tls import TlsConfig, client_tls

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_TOPIC",
    "MASTER_ID",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "AdminClient",
    "AdminError",
    "BrokerData",
    "ClientConnection",
    "ClusterInfo",
    "ConsumerConnection",
    "GroupConfig",
    "KeyQueryResult",
    "QueueData",
    "QueueOffset",
    "QueueProgress",
    "QueueStatus",
    "SendResult",
    "TimeRangeResult",
    "TopicRoute",
    "loads_lenient",
    "parse_address_list",
    "parse_tag_expression",
]

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "TBW102"
"""RocketMQ's AUTO_CREATE_TOPIC_KEY_TOPIC: the template route for auto-created topics."""
DEFAULT_CLUSTER = "DefaultCluster"
PRODUCER_GROUP = "DEFAULT_PRODUCER"
"""Java MixAll.DEFAULT_PRODUCER_GROUP, used for sends from the tools."""
UNIQUE_KEY_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
"""Java MixAll.UNIQUE_MSG_QUERY_FLAG: extField of QUERY_MESSAGE."""
MAX_QUERY_END = 2**63 - 1


class AdminClient(AsyncClient):
    """Async admin client; use as `async with AdminClient("127.0.0.1:9876") as admin:`."""

    def __init__(
        self,
        namesrv: str | Sequence[str],
        *,
        timeout: float = 3.0,
        clock: Clock = SYSTEM_CLOCK,
        credentials: Credentials | None = None,
        tls: bool | TlsConfig | None = None,
    ) -> None:
        self._namesrv = parse_address_list(namesrv)
        self._credentials = credentials
        self._tls = client_tls(tls)
        self._timeout = timeout
        self._clock = clock
        self._remoting: RemotingClient | None = None
        self._codec: SendCodec | None = None
        self._publish_routes: dict[str, TopicRoute] = {}
        self._send_index: dict[str, int] = {}

    @property
    def namesrv(self) -> list[str]:
        return list(self._namesrv)

    async def start(self) -> None:
        """Nothing to do: connections open on first use."""

    async def shutdown(self) -> None:
        await self.close()

    async def close(self) -> None:
        remoting, self._remoting = self._remoting, None
        if remoting is not None:
            await remoting.close()

    # -- plumbing ---------------------------------------------------------------------

    def _client(self) -> RemotingClient:
        if self._remoting is None:
            credentials = self._credentials
            self._remoting = RemotingClient(
                sign=credentials.sign if credentials is not None else None, tls=self._tls
            )
        return self._remoting

    async def _call(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        role: str = "broker",
        timeout: float | None = None,
    ) -> RemotingCommand:
        wait = self._timeout if timeout is None else timeout
        command = RemotingCommand.request(code, ext_fields, body)
        return await call(self._client(), address, command, wait, role=role, error=AdminError)

    async def _call_namesrv(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        async def attempt(address: str) -> RemotingCommand:
            response = await self._call(address, code, ext_fields, body, role="name server")
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise AdminError(
                    await not_a_name_server(
                        address, response, lambda probe: self._call(address, probe)
                    ),
                    response.code,
                )
            return response

        _, response = await first_answer(self._namesrv, attempt, AdminError)
        return response

    async def _each(
        self,
        masters: Mapping[str, str],
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> dict[str, RemotingCommand]:
        """The same request to several brokers at once; broker name -> response."""
        names = list(masters)
        responses = await asyncio.gather(
            *(self._call(masters[name], code, ext_fields, body) for name in names)
        )
        return dict(zip(names, responses, strict=True))

    # -- name server ------------------------------------------------------------------

    async def topic_route(self, topic: str) -> TopicRoute:
        header = GetRouteInfoRequestHeader(topic=topic)
        response = await self._call_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, encode_header(header)
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST or (
            response.code == ResponseCode.SUCCESS and not response.body
        ):
            raise AdminError(f"topic {topic} does not exist", ResponseCode.TOPIC_NOT_EXIST)
        return TopicRoute.from_json(topic, decode_body(check(response), "route"))

    async def cluster_info(self) -> ClusterInfo:
        response = check(await self._call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))
        document = decode_body(response, "cluster info")
        brokers = {
            str(name): broker_data_from_json(raw)
            for name, raw in (document.get("brokerAddrTable") or {}).items()
        }
        clusters = {
            str(name): tuple(sorted(str(b) for b in members or ()))
            for name, members in (document.get("clusterAddrTable") or {}).items()
        }
        return ClusterInfo(dict(sorted(brokers.items())), dict(sorted(clusters.items())))

    async def all_topics(self) -> list[str]:
        response = await self._call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        document = decode_body(check(response), "topic list")
        return sorted(str(t) for t in document.get("topicList") or ())

    # -- topics ---------------------------------------------------------------------------

    async def _target_masters(
        self, cluster: str | None, brokers: Sequence[str] | None
    ) -> dict[str, str]:
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.clusters:
            known = ", ".join(info.clusters) or "none"
            raise AdminError(
                f"cluster {cluster} not found (known clusters: {known})",
                ResponseCode.BROKER_NOT_EXIST,
            )
        masters = info.masters(cluster)
        if brokers:
            unknown = sorted(set(brokers) - set(masters))
            if unknown:
                raise AdminError(
                    f"no master broker named {', '.join(unknown)}", ResponseCode.BROKER_NOT_EXIST
                )
            masters = {name: masters[name] for name in sorted(set(brokers))}
        if not masters:
            where = f"cluster {cluster}" if cluster else "any cluster"
            raise AdminError(f"no master broker in {where}", ResponseCode.BROKER_NOT_EXIST)
        return masters

    async def create_topic(
        self,
        name: str,
        queues: int = 4,
        perm: int = PERM_READ | PERM_WRITE,
        brokers: Sequence[str] | None = None,
        cluster: str | None = DEFAULT_CLUSTER,
        attributes: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Create (or update) `name` on every master of `cluster` (or on `brokers`).

        Waits briefly for the brokers' registrations to show in the route;
        returns the broker names.
        """
        masters = await self._target_masters(cluster, brokers)
        header = CreateTopicRequestHeader(
            topic=name,
            default_topic=DEFAULT_TOPIC,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            topic_sys_flag=0,
            order=False,
            attributes=attributes_text(attributes),
        )
        responses = await self._each(
            masters, RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(header)
        )
        for response in responses.values():
            check(response)
        expected = {b: QueueData(b, queues, queues, perm) for b in masters}
        await self._await_route(name, expected)
        return list(masters)

    async def existing_queues(self, name: str) -> dict[str, QueueData]:
        """The queues topic `name` has on each broker now; {} when it does not exist."""
        try:
            route = await self.topic_route(name)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return {}
            raise
        return {queue.broker_name: queue for queue in route.queue_datas}

    async def topic_message_type(self, name: str) -> str:
        """The message type topic `name` accepts (RocketMQ 5's `message.type`
        attribute) as its brokers hold it: NORMAL when none is declared, as
        Java's TopicConfig.getTopicMessageType; the types, "/"-joined, when
        brokers disagree."""
        configs = await self._topic_configs((await self.topic_route(name)).masters(), name)
        kinds = set()
        for config in configs.values():
            attributes = config.get("attributes")
            declared = attributes.get("message.type") if isinstance(attributes, dict) else None
            kinds.add(str(declared or "NORMAL").upper())
        return "/".join(sorted(kinds)) or "NORMAL"

    async def _topic_configs(self, masters: Mapping[str, str], topic: str) -> dict[str, Any]:
        responses = await self._each(masters, RequestCode.GET_ALL_TOPIC_CONFIG)
        result: dict[str, Any] = {}
        for broker, response in responses.items():
            document = decode_body(check(response), "topic config")
            config = (document.get("topicConfigTable") or {}).get(topic)
            if isinstance(config, dict):
                result[broker] = config
        return result

    async def all_topic_configs(self, cluster: str | None = None) -> dict[str, dict[str, Any]]:
        """Every topic config (TopicConfig JSON) of every master (of `cluster`):
        broker name -> topic -> config."""
        masters = (await self.cluster_info()).masters(cluster)
        result: dict[str, dict[str, Any]] = {}
        for broker, response in (
            await self._each(masters, RequestCode.GET_ALL_TOPIC_CONFIG)
        ).items():
            document = decode_body(check(response), "topic config")
            table = document.get("topicConfigTable") or {}
            result[broker] = {
                str(topic): config for topic, config in table.items() if isinstance(config, dict)
            }
        return result

    async def update_topic(
        self,
        name: str,
        *,
        queues: int | None = None,
        read_queues: int | None = None,
        write_queues: int | None = None,
        perm: int | None = None,
    ) -> list[QueueData]:
        """Change queue counts and/or permission of `name` on every broker serving it."""
        route = await self.topic_route(name)
        masters = route.masters()
        configs = await self._topic_configs(masters, name)
        updated: dict[str, QueueData] = {}
        for broker, address in masters.items():
            current = next(q for q in route.queue_datas if q.broker_name == broker)
            config = configs.get(broker, {})
            new = QueueData(
                broker,
                read_queues
                or queues
                or as_int(config.get("readQueueNums"), current.read_queue_nums),
                write_queues
                or queues
                or as_int(config.get("writeQueueNums"), current.write_queue_nums),
                perm if perm is not None else as_int(config.get("perm"), current.perm),
            )
            header = CreateTopicRequestHeader(
                topic=name,
                default_topic=DEFAULT_TOPIC,
                read_queue_nums=new.read_queue_nums,
                write_queue_nums=new.write_queue_nums,
                perm=new.perm,
                topic_filter_type=str(config.get("topicFilterType") or "SINGLE_TAG"),
                topic_sys_flag=as_int(config.get("topicSysFlag"), current.topic_sys_flag),
                order=bool(config.get("order", False)),
            )
            check(
                await self._call(
                    address, RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(header)
                )
            )
            updated[broker] = new
        await self._await_route(name, updated)
        return list(updated.values())

    async def _await_route(self, topic: str, expected: Mapping[str, QueueData]) -> None:
        """Poll the route until every broker shows `expected`, for up to the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        pause = 0.02
        while True:
            with contextlib.suppress(AdminError):
                route = await self.topic_route(topic)
                shown = {
                    q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm)
                    for q in route.queue_datas
                }
                if all(
                    shown.get(b) == (q.read_queue_nums, q.write_queue_nums, q.perm)
                    for b, q in expected.items()
                ):
                    return
            if loop.time() + pause > deadline:
                log.info("route of %s does not show the change yet", topic)
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.2)

    async def delete_topic(self, name: str) -> list[str]:
        """Delete `name` on its brokers, then from every name server; returns the brokers."""
        masters = (await self.topic_route(name)).masters()
        header = encode_header(DeleteTopicRequestHeader(topic=name))
        for response in (
            await self._each(masters, RequestCode.DELETE_TOPIC_IN_BROKER, header)
        ).values():
            check(response)
        ns_header = encode_header(DeleteTopicFromNamesrvRequestHeader(topic=name))
        for address in self._namesrv:
            response = await self._call(
                address, RequestCode.DELETE_TOPIC_IN_NAMESRV, ns_header, role="name server"
            )
            check(response)
        self._publish_routes.pop(name, None)
        return list(masters)

    async def set_write_perm(self, namesrv: str, broker_name: str, *, writable: bool) -> int:
        """Wipe (`writable=False`) or give back the write permission of broker group
        `broker_name` in the routes of name server `namesrv` (mqadmin wipeWritePerm /
        addWritePerm, sent to each name server in turn); how many topics it serves
        there. Producers stop choosing a wiped broker once they refresh its routes
        (30 s); consumers go on reading it."""
        code = (
            RequestCode.ADD_WRITE_PERM_OF_BROKER
            if writable
            else RequestCode.WIPE_WRITE_PERM_OF_BROKER
        )
        header = encode_header(BrokerWritePermRequestHeader(broker_name=broker_name))
        response = check(await self._call(namesrv, code, header, role="name server"))
        field = "addTopicCount" if writable else "wipeTopicCount"
        return as_int(response.ext_fields.get(field))

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Min/max offset and last store time of every queue of `topic`."""
        masters = (await self.topic_route(topic)).masters()
        header = encode_header(TopicRequestHeader(topic=topic))
        rows: list[QueueStatus] = []
        for broker, response in (
            await self._each(masters, RequestCode.GET_TOPIC_STATS_INFO, header)
        ).items():
            document = decode_body(check(response), "topic stats")
            for key, value in (document.get("offsetTable") or {}).items():
                queue = self._queue_of(key, topic, broker)
                value = value if isinstance(value, dict) else {}
                rows.append(
                    QueueStatus(
                        topic=queue.topic,
                        broker_name=queue.broker_name,
                        queue_id=queue.queue_id,
                        min_offset=as_int(value.get("minOffset")),
                        max_offset=as_int(value.get("maxOffset")),
                        last_update_timestamp=as_int(value.get("lastUpdateTimestamp")),
                    )
                )
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    @staticmethod
    def _queue_of(key: str, topic: str | None, broker: str) -> MessageQueue:
        try:
            return message_queue_key(key)
        except ValueError as exc:
            raise AdminError(
                f"malformed queue key from broker {broker}: {exc}", ResponseCode.SYSTEM_ERROR
            ) from None

    # -- groups and offsets ---------------------------------------------------------------

    async def create_group(
        self,
        name: str,
        *,
        retry_max_times: int = 16,
        broadcast: bool = True,
        orderly: bool = False,
        from_min: bool = True,
        broker_id: int = MASTER_ID,
        which_broker_when_consume_slowly: int = 1,
        brokers: Sequence[str] | None = None,
        cluster: str | None = DEFAULT_CLUSTER,
    ) -> list[str]:
        """Create (or update) subscription group `name` on every master; returns the brokers.

        `broker_id` and `which_broker_when_consume_slowly` say where the
        group's consumers are sent to read, normally and when far behind, by
        a broker with `slave_read_enable` (docs/replication.md)."""
        masters = await self._target_masters(cluster, brokers)
        config = group_config_json(
            name,
            retry_max_times=retry_max_times,
            broadcast=broadcast,
            orderly=orderly,
            from_min=from_min,
            broker_id=broker_id,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly,
        )
        body = json.dumps(config).encode()
        responses = await self._each(
            masters, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body
        )
        for response in responses.values():
            check(response)
        return list(masters)

    async def delete_group(
        self,
        name: str,
        *,
        clean_offset: bool = False,
        brokers: Sequence[str] | None = None,
        cluster: str | None = DEFAULT_CLUSTER,
    ) -> list[str]:
        """Delete subscription group `name` on every master (of `cluster`, or the
        named `brokers`), its committed offsets too with `clean_offset`
        (DELETE_SUBSCRIPTIONGROUP, mqadmin deleteSubGroup -r); returns the brokers."""
        masters = await self._target_masters(cluster, brokers)
        header = encode_header(
            DeleteSubscriptionGroupRequestHeader(group_name=name, clean_offset=clean_offset)
        )
        for response in (
            await self._each(masters, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)
        ).values():
            check(response)
        return list(masters)

    async def list_groups(self, cluster: str | None = None) -> list[GroupConfig]:
        """Every subscription group of every master (of `cluster`), per broker."""
        masters = (await self.cluster_info()).masters(cluster)
        rows: list[GroupConfig] = []
        responses = await self._each(masters, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        for broker, response in responses.items():
            document = decode_body(check(response), "subscription groups")
            for group, config in (document.get("subscriptionGroupTable") or {}).items():
                rows.append(
                    GroupConfig(str(group), broker, config if isinstance(config, dict) else {})
                )
        return sorted(rows, key=lambda g: (g.group_name, g.broker_name))

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """Broker offset, consumer offset and lag per queue the group consumes."""
        if topic is not None:
            masters = (await self.topic_route(topic)).masters()
        else:
            masters = (await self.cluster_info()).masters()
        header = encode_header(GetConsumeStatsRequestHeader(consumer_group=group, topic=topic))
        rows: list[QueueProgress] = []
        for broker, response in (
            await self._each(masters, RequestCode.GET_CONSUME_STATS, header)
        ).items():
            if response.code != ResponseCode.SUCCESS and topic is None and len(masters) > 1:
                log.info("broker %s: %s", broker, remark(response))
                continue
            document = decode_body(check(response), "consume stats")
            for key, value in (document.get("offsetTable") or {}).items():
                queue = self._queue_of(key, topic, broker)
                value = value if isinstance(value, dict) else {}
                rows.append(
                    QueueProgress(
                        topic=queue.topic,
                        broker_name=queue.broker_name,
                        queue_id=queue.queue_id,
                        broker_offset=as_int(value.get("brokerOffset")),
                        consumer_offset=as_int(value.get("consumerOffset"), -1),
                        last_timestamp=as_int(value.get("lastTimestamp")),
                    )
                )
        return sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id))

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """The online consumers of `group` (client id, address, language,
        version) and their subscriptions, from every master (a client
        heartbeats to each broker it reads from); none online is an empty answer."""
        header = encode_header(ConsumerGroupRequestHeader(consumer_group=group))
        return await self._connections(RequestCode.GET_CONSUMER_CONNECTION_LIST, header)

    async def consumer_running_info(
        self, group: str, client_id: str | None = None
    ) -> dict[str, dict[str, Any] | AdminError]:
        """What each online consumer of `group` (or only `client_id`) says of itself:
        its settings, subscriptions and, per queue, offsets and cached messages
        (GET_CONSUMER_RUNNING_INFO, asked through a broker it is connected to, as
        mqadmin consumerStatus does); client id -> its ConsumerRunningInfo, or the
        error that client's answer was."""
        connections = (await self.consumer_connection(group)).connections
        masters = (await self.cluster_info()).masters()
        found: dict[str, dict[str, Any] | AdminError] = {}
        for client in connections:
            if client_id is not None and client.client_id != client_id:
                continue
            header = encode_header(
                GetConsumerRunningInfoRequestHeader(
                    consumer_group=group, client_id=client.client_id
                )
            )
            try:
                address = masters[client.broker_name]
                response = await self._call(
                    address, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout=15.0
                )
                found[client.client_id] = decode_body(check(response), "consumer running info")
            except KeyError:
                found[client.client_id] = AdminError(
                    f"no master for {client.broker_name}", ResponseCode.BROKER_NOT_EXIST
                )
            except AdminError as exc:
                found[client.client_id] = exc
        return found

    async def consume_directly(
        self, group: str, msg_id: str, *, topic: str | None = None, client_id: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Have an online consumer of `group` (`client_id`, or the first) run its
        listener over message `msg_id` (either id; a client id needs `topic`), as
        mqadmin consumeMessage and the dashboard's "consume directly" do
        (CONSUME_MESSAGE_DIRECTLY, through the broker that stores it); offsets and
        retries are left alone. The client id asked and its ConsumeMessageDirectlyResult."""
        message = await self.message_by_id(msg_id, topic)
        if client_id is None:
            online = (await self.consumer_connection(group)).connections
            if not online:
                raise AdminError(
                    f"no consumer of group {group} is online", ResponseCode.CONSUMER_NOT_ONLINE
                )
            client_id = online[0].client_id
        address = offset_message_id_address(message.msg_id)
        if address is None:
            raise AdminError(f"{message.msg_id} names no broker", ResponseCode.SYSTEM_ERROR)
        header = encode_header(
            ConsumeMessageDirectlyRequestHeader(
                consumer_group=group,
                client_id=client_id,
                msg_id=message.msg_id,
                topic=message.topic,
            )
        )
        response = check(
            await self._call(address, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout=15.0)
        )
        return client_id, decode_body(response, "consume result")

    async def producer_connection(self, group: str) -> list[ClientConnection]:
        """The online producers of `group` (client id, address, language, version),
        each once, from every master (a producer heartbeats to the brokers it
        sends to); none online is an empty list."""
        header = encode_header(ProducerGroupRequestHeader(producer_group=group))
        found = await self._connections(RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
        return list(found.connections)

    async def _connections(self, code: int, header: Mapping[str, str]) -> ConsumerConnection:
        """A connection-list request to every master, merged; a broker that knows no
        client of the group (CONSUMER_NOT_ONLINE, or the producer side's "not exist")
        adds nothing."""
        masters = (await self.cluster_info()).masters()
        documents: dict[str, dict[str, Any]] = {}
        for broker, response in (await self._each(masters, code, header)).items():
            if response.code == ResponseCode.CONSUMER_NOT_ONLINE or (
                response.code == ResponseCode.SYSTEM_ERROR and "not exist" in remark(response)
            ):
                continue
            documents[broker] = decode_body(check(response), "connection list")
        return merge_consumer_connections(documents)

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> list[QueueOffset]:
        """Move `group`'s offsets on `topic` to the first message stored at/after the
        time: 0 is the earliest message, -1 the end of each queue (as Java's Broker2Client)."""
        masters = (await self.topic_route(topic)).masters()
        header = encode_header(
            ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms)
        )
        rows: list[QueueOffset] = []
        for broker, response in (
            await self._each(masters, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        ).items():
            rows += self._reset_rows(check(response), topic, broker)
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    async def reset_offset_to(
        self,
        group: str,
        topic: str,
        offset: int,
        *,
        queue_id: int | None = None,
        broker: str | None = None,
    ) -> list[QueueOffset]:
        """Move `group`'s offset of every queue of `topic` (or only of queue
        `queue_id`, on `broker` or on every broker) to `offset`: one
        INVOKE_BROKER_TO_RESET_OFFSET with queueId and offset per queue, as
        Java's resetOffsetByQueueId. A tidemq broker keeps the offset within the
        queue (at most its max offset); a Java broker refuses one outside it."""
        route = await self.topic_route(topic)
        masters = route.masters()
        if broker is not None and broker not in masters:
            raise AdminError(
                f"broker {broker} serves no queue of {topic}", ResponseCode.BROKER_NOT_EXIST
            )
        rows: list[QueueOffset] = []
        for queue in route.queue_datas:
            address = masters.get(queue.broker_name)
            if address is None or broker not in (None, queue.broker_name):
                continue
            if queue_id is not None and queue_id >= queue.read_queue_nums:
                raise AdminError(
                    f"{topic} has {queue.read_queue_nums} queues on {queue.broker_name}: "
                    f"no queue {queue_id}",
                    ResponseCode.INVALID_PARAMETER,
                )
            for qid in range(queue.read_queue_nums) if queue_id is None else (queue_id,):
                header = ResetOffsetRequestHeader(
                    topic=topic, group=group, timestamp=0, queue_id=qid, offset=offset
                )
                response = await self._call(
                    address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, encode_header(header)
                )
                rows += self._reset_rows(check(response), topic, queue.broker_name)
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    def _reset_rows(self, response: RemotingCommand, topic: str, broker: str) -> list[QueueOffset]:
        document = decode_body(response, "reset offset")
        rows = []
        for key, value in (document.get("offsetTable") or {}).items():
            queue = self._queue_of(key, topic, broker)
            rows.append(QueueOffset(queue.topic, queue.broker_name, queue.queue_id, as_int(value)))
        return rows

    # -- RocketMQ 5 users and ACLs ----------------------------------------------------------

    async def _auth_write(
        self, code: int, header: Mapping[str, str], body: Mapping[str, Any] | None = None
    ) -> dict[str, str | None]:
        """A user/ACL change on every master broker (mqadmin's ``-c``): broker name ->
        the remark of its SUCCESS (None when it has none). A refusal is the AdminError
        of the first broker by name that refused."""
        masters = await self._target_masters(None, None)
        data = json.dumps(body).encode() if body is not None else b""
        responses = await self._each(masters, code, dict(header), data)
        for name in sorted(responses):
            check(responses[name])
        return {name: responses[name].remark for name in sorted(responses)}

    async def _auth_read(self, code: int, header: Mapping[str, str]) -> Any:
        """A user/ACL read from the first master broker by name (they all hold the same);
        None for an answer without a body (RocketMQ's for a user or ACL that is not there)."""
        masters = await self._target_masters(None, None)
        first = sorted(masters)[0]
        response = check(await self._call(masters[first], code, dict(header)))
        return json.loads(response.body or b"null")

    async def create_user(
        self, username: str, password: str, *, user_type: str = "Normal", status: str = "enable"
    ) -> list[str]:
        """AUTH_CREATE_USER (3001): a RocketMQ 5 user (username = access key, password = secret)."""
        body = {
            "username": username,
            "password": password,
            "userType": user_type,
            "userStatus": status,
        }
        return list(
            await self._auth_write(RequestCode.AUTH_CREATE_USER, {"username": username}, body)
        )

    async def update_user(
        self,
        username: str,
        *,
        password: str | None = None,
        user_type: str | None = None,
        status: str | None = None,
    ) -> list[str]:
        """AUTH_UPDATE_USER (3002): only the fields given change."""
        body = {"username": username, "password": password, "userType": user_type}
        body["userStatus"] = status
        return list(
            await self._auth_write(RequestCode.AUTH_UPDATE_USER, {"username": username}, body)
        )

    async def delete_user(self, username: str) -> list[str]:
        """AUTH_DELETE_USER (3003), with the user's ACL: the brokers it was deleted on.
        A broker without such a user answers SUCCESS as RocketMQ does (tidemq's with a
        remark saying so, and it is left out)."""
        answers = await self._auth_write(RequestCode.AUTH_DELETE_USER, {"username": username})
        return [name for name, note in answers.items() if not note]

    async def get_user(self, username: str) -> dict[str, Any] | None:
        """AUTH_GET_USER (3004): the UserInfo (no password), None when there is no such user."""
        found = await self._auth_read(RequestCode.AUTH_GET_USER, {"username": username})
        return dict(found) if found else None

    async def list_users(self, name_filter: str | None = None) -> list[dict[str, Any]]:
        """AUTH_LIST_USER (3005): UserInfo objects, without passwords."""
        header = {"filter": name_filter} if name_filter else {}
        return list(await self._auth_read(RequestCode.AUTH_LIST_USER, header) or [])

    async def create_acl(
        self, subject: str, entries: Sequence[Mapping[str, Any]], *, update: bool = False
    ) -> list[str]:
        """AUTH_CREATE_ACL (3006) / AUTH_UPDATE_ACL (3007): `entries` are PolicyEntryInfo
        objects (resource, actions, sourceIps, decision); entries for resources the ACL
        already has replace them."""
        code = RequestCode.AUTH_UPDATE_ACL if update else RequestCode.AUTH_CREATE_ACL
        body = {"subject": subject, "policies": [{"policyType": "Custom", "entries": entries}]}
        return list(await self._auth_write(code, {"subject": subject}, body))

    async def delete_acl(self, subject: str, resource: str | None = None) -> list[str]:
        """AUTH_DELETE_ACL (3008): one resource's entry, or the whole ACL."""
        header = {"subject": subject, **({"resource": resource} if resource else {})}
        return list(await self._auth_write(RequestCode.AUTH_DELETE_ACL, header))

    async def get_acl(self, subject: str) -> dict[str, Any] | None:
        """AUTH_GET_ACL (3009): the AclInfo, None when the user has no ACL."""
        found = await self._auth_read(RequestCode.AUTH_GET_ACL, {"subject": subject})
        return dict(found) if found else None

    async def list_acls(
        self, subject_filter: str | None = None, resource_filter: str | None = None
    ) -> list[dict[str, Any]]:
        """AUTH_LIST_ACL (3010): AclInfo objects."""
        header = {
            k: v
            for k, v in (("subjectFilter", subject_filter), ("resourceFilter", resource_filter))
            if v
        }
        return list(await self._auth_read(RequestCode.AUTH_LIST_ACL, header) or [])

    async def broker_runtime_stats(self, address: str) -> dict[str, str]:
        """The broker's KVTable of runtime figures (GET_BROKER_RUNTIME_INFO)."""
        response = check(await self._call(address, RequestCode.GET_BROKER_RUNTIME_INFO))
        table = decode_body(response, "runtime info").get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    async def broker_config(self, address: str) -> dict[str, str]:
        """The broker's settings under Java's names (GET_BROKER_CONFIG)."""
        response = check(await self._call(address, RequestCode.GET_BROKER_CONFIG))
        return parse_java_properties(response.body.decode("utf-8", "replace"))

    async def update_broker_config(self, address: str, settings: Mapping[str, str]) -> None:
        """Change settings of the broker at `address` while it runs (UPDATE_BROKER_CONFIG,
        mqadmin updateBrokerConfig); tidemq changes brokerPermission, and refuses others."""
        body = java_properties_text(settings).encode("utf-8")
        check(await self._call(address, RequestCode.UPDATE_BROKER_CONFIG, None, body))

    # -- messages -----------------------------------------------------------------------

    async def _publish_route(self, topic: str) -> TopicRoute:
        route = self._publish_routes.get(topic)
        if route is not None:
            return route
        try:
            route = await self.topic_route(topic)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            # As Java's producer: a broker that auto-creates topics registers the
            # TBW102 template; send there and the broker creates the topic.
            try:
                template = await self.topic_route(DEFAULT_TOPIC)
            except AdminError:
                raise exc from None
            route = route_from_template(topic, template, DEFAULT_TOPIC_QUEUE_NUMS)
            if not route.write_queues():
                raise exc from None
        self._publish_routes[topic] = route
        return route

    def _send_codec(self) -> SendCodec:
        if self._codec is None:
            ids = UniqueIdGenerator(self._clock)
            self._codec = SendCodec(PRODUCER_GROUP, ids.next_id)
        return self._codec

    async def send(
        self,
        topic: str,
        body: bytes,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        flag: int = 0,
        deliver_at: DeliverAt | None = None,
        deliver_after: DeliverAfter | None = None,
    ) -> SendResult:
        """Send one message to the next queue (round-robin) of `topic`; with
        `deliver_at` / `deliver_after` a timer message (its result carries a
        recall handle).

        Reserved or malformed property names raise ValueError; an invalid
        topic, an empty or oversized body, AdminError MESSAGE_ILLEGAL (both
        before any request)."""
        message = make_message(
            topic,
            body,
            tags=tags,
            keys=keys,
            properties=properties,
            flag=flag,
            deliver_at=deliver_at,
            deliver_after=deliver_after,
        )
        return await self._send_message(message)

    async def _send_message(self, message: Message) -> SendResult:
        """Encode `message` and send it to the next queue (round-robin) of its topic."""
        topic = message.topic
        try:
            prepared = self._send_codec().prepare(message)
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None
        route = await self._publish_route(topic)
        queues = route.write_queues()
        if not queues:
            raise AdminError(f"topic {topic} has no writable queue", ResponseCode.NO_PERMISSION)
        index = self._send_index.get(topic)
        if index is None:
            index = random.randrange(len(queues))
        self._send_index[topic] = index + 1
        queue = queues[index % len(queues)]
        address = route.masters()[queue.broker_name]
        command = prepared.request(queue.queue_id, self._clock.now_ms())
        response = await self._call(address, command.code, command.ext_fields, command.body)
        try:
            return send_result(response, prepared, queue)
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None

    async def dead_letters(self, group: str, max_num: int = 64) -> TimeRangeResult:
        """The dead letters of `group` (its %DLQ% topic), oldest first, at most
        `max_num`; none when the topic was never made (nothing died yet)."""
        topic = f"%DLQ%{group}"
        try:
            return await self.messages_between(topic, 0, self._clock.now_ms(), max_num)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            return TimeRangeResult([], False)

    async def resend_dead_letter(self, group: str, msg_id: str) -> SendResult:
        """Give dead letter `msg_id` (either id) of `group` back to the group:
        a copy goes to `%RETRY%<group>`, due now, with a fresh retry budget
        (_dead_letter.py says what it keeps). The dead letter itself stays."""
        dlq = f"%DLQ%{group}"
        message = await self.message_by_id(msg_id, dlq)
        if dead_letter_group(message.topic) != group:
            raise AdminError(
                f"message {msg_id} is in {message.topic}, not in the dead-letter topic {dlq}",
                ResponseCode.INVALID_PARAMETER,
            )
        return await self._send_message(retry_copy(message, group))

    async def messages_between(
        self, topic: str, begin_ms: int, end_ms: int, max_num: int = 64
    ) -> TimeRangeResult:
        """Messages of `topic` stored from `begin_ms` to `end_ms` (inclusive),
        oldest first, at most `max_num` (the result says when more matched)."""
        if begin_ms > end_ms:
            raise AdminError("the time range begins after it ends", ResponseCode.INVALID_PARAMETER)
        route = await self.topic_route(topic)
        return await messages_between(
            self._call, route.masters(), route.read_queues(), begin_ms, end_ms, max_num
        )

    async def recall(self, topic: str, handle: str) -> str:
        """Cancel a timer message before it is due (RECALL_MESSAGE); its msg id."""
        try:
            broker_name, fields = recall_request(topic, handle, None)
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None
        address = (await self.topic_route(topic)).masters().get(broker_name)
        if address is None:
            raise AdminError(
                f"broker {broker_name} of the recall handle serves no queue of {topic}",
                ResponseCode.ILLEGAL_OPERATION,
            )
        response = await self._call(address, RequestCode.RECALL_MESSAGE, fields)
        try:
            return recall_answer(response, topic)
        except ClientError as exc:
            raise AdminError(exc.message, exc.code) from None

    async def find_by_key(self, topic: str, key: str, max_num: int = 64) -> KeyQueryResult:
        """The newest `max_num` messages of `topic` whose KEYS hold `key`, oldest
        first, paging through each broker's index; the result says whether more
        matched (`cut`) and whether some may be missing (`incomplete`)."""
        masters = (await self.topic_route(topic)).masters()

        def wanted(message: MessageExt) -> bool:
            return message.topic == topic and key in message.keys

        def page_of(address: str) -> Page:
            async def page(end_ms: int, below: int) -> tuple[list[MessageExt], bool]:
                return await self._query_page(address, topic, key, end_ms, below)

            return page

        results = await asyncio.gather(
            *(
                search_pages(page_of(address), wanted, max_num, MAX_QUERY_END)
                for address in masters.values()
            )
        )
        return merge(results, max_num)

    async def query_by_key(
        self, topic: str, key: str, max_num: int = 32, *, unique: bool = False
    ) -> list[MessageExt]:
        """Messages of `topic` whose KEYS (or, with `unique`, UNIQ_KEY) holds `key`,
        oldest first: the newest `max_num` (see find_by_key)."""
        if not unique:
            return (await self.find_by_key(topic, key, max_num)).messages
        masters = (await self.topic_route(topic)).masters()
        found: dict[tuple[str, int], MessageExt] = {}
        for address in masters.values():
            header = self._query_header(topic, key, max_num, MAX_QUERY_END, unique=True)
            records, _ = await self._query(address, header)
            for message in records:
                if message.topic == topic and message.unique_key == key:
                    found[(message.store_host, message.commit_log_offset)] = message
        return sorted(found.values(), key=lambda m: (m.store_timestamp, m.msg_id))[:max_num]

    async def _query_page(
        self, address: str, topic: str, key: str, end_ms: int, below: int
    ) -> tuple[list[MessageExt], bool]:
        """One page of a key query (see _key_query.py): records, and whether the
        broker applied the cursor `below`."""
        header = self._query_header(topic, key, PAGE_SIZE, end_ms)
        header[QUERY_BELOW_OFFSET] = str(below)
        return await self._query(address, header)

    @staticmethod
    def _query_header(
        topic: str, key: str, max_num: int, end_ms: int, *, unique: bool = False
    ) -> dict[str, str]:
        header = encode_header(
            QueryMessageRequestHeader(
                topic=topic, key=key, max_num=max_num, begin_timestamp=0, end_timestamp=end_ms
            )
        )
        header[UNIQUE_KEY_QUERY_FLAG] = "true" if unique else "false"
        return header

    async def _query(self, address: str, header: dict[str, str]) -> tuple[list[MessageExt], bool]:
        """One QUERY_MESSAGE: the records the broker found (unchecked), [] for
        none; and whether it echoed the paging cursor."""
        response = await self._call(
            address, RequestCode.QUERY_MESSAGE, header, timeout=self._timeout * 3
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return [], False
        records = decode_messages(check(response).body, address)
        cursor = header.get(QUERY_BELOW_OFFSET)
        return records, cursor is not None and response.ext_fields.get(QUERY_BELOW_OFFSET) == cursor

    async def view_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message with offset message id `msg_id` (store host + commit log offset)."""
        try:
            host, port, offset = decode_offset_message_id(msg_id.strip())
        except ValueError:
            raise AdminError(
                f"{msg_id} is not an offset message id", ResponseCode.INVALID_PARAMETER
            ) from None
        address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        header = encode_header(ViewMessageRequestHeader(offset=offset, topic=topic))
        response = check(await self._call(address, RequestCode.VIEW_MESSAGE_BY_ID, header))
        try:
            message, _ = decode_record(response.body, decompress=True)
        except ProtocolError as exc:
            raise AdminError(
                f"malformed message from the broker at {address}: {exc}", ResponseCode.SYSTEM_ERROR
            ) from None
        return message

    async def message_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """Look a message up by either of its ids.

        An offset message id (the broker's: its address and the commit-log
        offset) is viewed at the broker it names, with or without a topic. Any
        other id is a client id (UNIQ_KEY, the `msg_id` of a send result): only
        a topic's index finds it, as Java's `queryMsgById` does with a topic
        (DefaultMQAdminExtImpl.viewMessage falls back to queryMessageByUniqKey).
        """
        msg_id = msg_id.strip()
        if not msg_id:
            raise AdminError("the message id is empty", ResponseCode.INVALID_PARAMETER)
        address = offset_message_id_address(msg_id)
        view_error: AdminError | None = None
        if address is not None:
            try:
                return await self.view_by_id(msg_id, topic)
            except AdminError as exc:
                view_error = exc
        if topic is None:
            if view_error is not None:
                raise AdminError(
                    f"{msg_id} reads as an offset message id of the broker at {address}, "
                    f"which could not show it ({view_error.message}); if it is a client "
                    "id (the msg_id a send prints), give its topic (--topic)",
                    view_error.code,
                )
            raise AdminError(
                f"{msg_id} is a client message id (UNIQ_KEY, the msg_id a send prints): "
                "only its topic's index can find it; give the topic (--topic), or look "
                "it up by its offset_msg_id",
                ResponseCode.INVALID_PARAMETER,
            )
        found = await self.query_by_key(topic, msg_id, 32, unique=True)
        if found:
            return found[0]
        if view_error is not None:
            raise view_error
        raise AdminError(f"no message {msg_id} in topic {topic}", ResponseCode.NO_MESSAGE)

    # -- tailing ----------------------------------------------------------------------------

    async def tail(
        self,
        topic: str,
        expression: str = "*",
        from_beginning: bool = False,
        sql: str | None = None,
        *,
        group: str | None = None,
        idle_timeout: float | None = None,
    ) -> AsyncGenerator[MessageExt, None]:
        """Messages of `topic` as they arrive, from every readable queue (long polling).

        `expression` is a tag filter ("TagA || TagB", "*"), or `sql` a SQL92
        filter. Starts at the end of each queue, or at its start with
        `from_beginning`. With `group`, starts at that group's committed
        offsets (if any) and commits what was delivered when the iteration
        ends. Ends after `idle_timeout` seconds without a message, if given.
        Close it (`contextlib.aclosing`) when stopping early.
        """
        route = await self.topic_route(topic)
        masters = route.masters()
        queues = [q for q in route.read_queues() if q.broker_name in masters]
        if not queues:
            raise AdminError(f"topic {topic} has no readable queue", ResponseCode.NO_PERMISSION)
        subscription = sql if sql is not None else (java_trim(expression) or SUB_ALL)
        spec = TailSpec(
            group=group or TOOLS_CONSUMER_GROUP,
            subscription=subscription,
            expression_type="SQL92" if sql is not None else "TAG",
            sub_version=self._clock.now_ms(),
            tags=None if sql is not None else parse_tag_expression(subscription),
            commit=group is not None,
        )
        tail = Tail(self._call, masters, spec, self._timeout)
        starts = {queue: await tail.start_offset(queue, from_beginning) for queue in queues}
        async with contextlib.aclosing(tail.messages(starts, idle_timeout)) as messages:
            async for message in messages:
                yield message
