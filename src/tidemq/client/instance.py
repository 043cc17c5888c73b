"""ClientInstance: what producers and consumers of one client share (RocketMQ's
MQClientInstance): the connections, the client id, topic routes and the broker
address table learned from them, heartbeats, and requests the broker sends
to the client.

Every producer and consumer object owns one ClientInstance (there is no
process-wide sharing as in Java: the default instance name carries a
nanosecond stamp, as Java 4.9.3+ does, so two consumers of one group in one
process get two client ids and share the queues).

Background work, each an owned task:

* route refresh every ``poll_namesrv_interval_s`` (30 s) for every topic a
  member uses; a changed route is handed to the members
  (``on_route_changed``);
* heartbeat every ``heartbeat_interval_s`` (30 s) to every broker of the
  address table (masters always, slaves too once a consumer is registered),
  carrying each member's ConsumerData / producer group.

Requests from brokers: NOTIFY_CONSUMER_IDS_CHANGED makes the group's consumer
rebalance at once; RESET_CONSUMER_CLIENT_OFFSET and GET_CONSUMER_RUNNING_INFO
go to the consumer if it implements them; CHECK_TRANSACTION_STATE goes to
the producer of the message's group (PGROUP) if it checks transactions
(`TransactionChecker`); anything else is answered REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import socket
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tidemq.acl.credentials import Credentials
from tidemq.client._peer import not_a_name_server
from tidemq.client._wire import (
    call,
    check,
    decode_body,
    first_answer,
    loads_lenient,
    message_queue_key,
    parse_address_list,
)
from tidemq.client.errors import ClientError
from tidemq.client.model import MASTER_ID, TopicRoute
from tidemq.common import properties as props
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.common.tasks import TaskSet
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetRouteInfoRequestHeader,
    UnregisterClientRequestHeader,
    decode_header,
    encode_header,
)
from tidemq.protocol.heartbeat import ConsumerData, HeartbeatData
from tidemq.record.codec import decode_record
from tidemq.transport.client import RemotingClient
from tidemq.transport.connection import Connection
from tidemq.transport.server import not_supported
from tidemq.transport.tls import TlsConfig

__all__ = [
    "ClientConfig",
    "ClientInstance",
    "ConsumerMember",
    "FoundBroker",
    "ProducerMember",
    "TransactionChecker",
    "local_ip",
]

log = logging.getLogger(__name__)

_instance_counter = itertools.count()


def local_ip() -> str:
    """This host's outgoing IPv4 address (no packet is sent), 127.0.0.1 if none."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
        if address and not address.startswith("0."):
            return address
    return "127.0.0.1"


def default_instance_name() -> str:
    """Java 4.9.3+: pid + '#' + nanoTime, so every client object gets its own id."""
    return f"{os.getpid()}#{time.monotonic_ns()}{next(_instance_counter)}"


@dataclass(frozen=True, slots=True)
class FoundBroker:
    """A broker address found for reading, and whether it is a slave (FindBrokerResult)."""

    address: str
    slave: bool


@dataclass(slots=True)
class ClientConfig:
    """Settings shared by every client kind (Java's ClientConfig)."""

    namesrv: str | Sequence[str] = "127.0.0.1:9876"
    """"host:port;host:port" or a list of addresses."""
    instance_name: str = field(default_factory=default_instance_name)
    client_ip: str = field(default_factory=local_ip)
    unit_name: str | None = None
    poll_namesrv_interval_s: float = 30.0
    heartbeat_interval_s: float = 30.0
    request_timeout_s: float = 3.0
    clock: Clock = SYSTEM_CLOCK
    credentials: Credentials | None = None
    """ACL credentials: every request (to name servers and brokers) is signed
    with them, as Java's AclClientRPCHook does; None sends them unsigned."""
    tls: TlsConfig | None = None
    """TLS on every connection (name servers and brokers); None: plain."""

    @property
    def client_id(self) -> str:
        base = f"{self.client_ip}@{self.instance_name}"
        return f"{base}@{self.unit_name}" if self.unit_name else base


class ProducerMember(Protocol):
    """What a ClientInstance needs of a producer registered with it (a
    transactional producer also implements `TransactionChecker`)."""

    @property
    def group(self) -> str: ...

    def published_topics(self) -> Iterable[str]: ...

    def on_route_changed(self, topic: str, route: TopicRoute) -> None: ...


class ConsumerMember(Protocol):
    """What a ClientInstance needs of a consumer registered with it."""

    @property
    def group(self) -> str: ...

    def consumer_data(self) -> ConsumerData:
        """The HEART_BEAT entry: model, ConsumeFromWhere, subscriptions (retry topic too)."""
        ...

    def subscribed_topics(self) -> Iterable[str]: ...

    def on_route_changed(self, topic: str, route: TopicRoute) -> None: ...

    def rebalance_soon(self) -> None:
        """Called on NOTIFY_CONSUMER_IDS_CHANGED: rebalance now, not at the next tick."""
        ...


@runtime_checkable
class TransactionChecker(Protocol):
    """Producers that answer CHECK_TRANSACTION_STATE (transactional producers).

    Called on the loop with the address of the asking broker; it must not
    block: the answer (END_TRANSACTION, fromTransactionCheck) goes later."""

    def check_transaction_state(
        self,
        broker_address: str,
        message: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) -> None: ...


@runtime_checkable
class OffsetResettable(Protocol):
    """Consumers that obey RESET_CONSUMER_CLIENT_OFFSET (admin reset-offset)."""

    def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None: ...


@runtime_checkable
class DirectConsumer(Protocol):
    """Consumers that answer CONSUME_MESSAGE_DIRECTLY (push consumers)."""

    async def consume_directly(self, message: MessageExt, broker_name: str) -> dict[str, Any]: ...


@runtime_checkable
class RunningInfoSource(Protocol):
    """Consumers that answer GET_CONSUMER_RUNNING_INFO."""

    def running_info(self) -> dict[str, Any]: ...


class ClientInstance:
    """Shared client plumbing; ``await start()`` before use, ``await close()`` at the end."""

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self.clock = self.config.clock
        self.client_id = self.config.client_id
        self._namesrv = parse_address_list(self.config.namesrv)
        credentials = self.config.credentials
        self._remoting = RemotingClient(
            request_handler=self._on_server_request,
            name="client",
            sign=credentials.sign if credentials is not None else None,
            tls=self.config.tls,
        )
        self._tasks = TaskSet(f"client {self.client_id}")
        self._routes: dict[str, TopicRoute] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._producers: dict[str, ProducerMember] = {}
        self._consumers: dict[str, ConsumerMember] = {}
        self._namesrv_index = random.randrange(len(self._namesrv))
        self._started = False
        self._closed = False

    # -- life cycle -----------------------------------------------------------------

    @property
    def remoting(self) -> RemotingClient:
        return self._remoting

    async def start(self) -> None:
        if self._closed:
            raise ClientError("this client has been shut down", ResponseCode.SYSTEM_ERROR)
        if self._started:
            return
        self._started = True
        self.spawn(self._every(self.config.poll_namesrv_interval_s, self.refresh_routes))
        self.spawn(self._every(self.config.heartbeat_interval_s, self.send_heartbeat))

    async def close(self) -> None:
        """Stop background work and close every connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._tasks.cancel_all()
        await self._remoting.close()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `coro` as a task owned by this instance (cancelled by close())."""
        return self._tasks.spawn(coro)

    async def _every(self, interval_s: float, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await action()
            except ClientError as exc:
                log.warning("%s: %s", self.client_id, exc)
            except Exception:
                log.exception("%s: background %s failed", self.client_id, action.__name__)

    # -- members --------------------------------------------------------------------

    def register_producer(self, member: ProducerMember) -> None:
        if member.group in self._producers:
            raise ClientError(
                f"producer group {member.group} is already registered in this client",
                ResponseCode.SYSTEM_ERROR,
            )
        self._producers[member.group] = member

    def register_consumer(self, member: ConsumerMember) -> None:
        if member.group in self._consumers:
            raise ClientError(
                f"consumer group {member.group} is already registered in this client",
                ResponseCode.SYSTEM_ERROR,
            )
        self._consumers[member.group] = member

    async def unregister(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        """Forget a member and tell every known broker (UNREGISTER_CLIENT); errors are logged."""
        if producer_group is not None:
            self._producers.pop(producer_group, None)
        if consumer_group is not None:
            self._consumers.pop(consumer_group, None)
        header = UnregisterClientRequestHeader(
            client_id=self.client_id,
            producer_group=producer_group,
            consumer_group=consumer_group,
        )
        fields = encode_header(header)
        await asyncio.gather(
            *(
                self._quietly(self.invoke(address, RequestCode.UNREGISTER_CLIENT, fields))
                for address in self.broker_addresses(masters_only=False)
            )
        )

    async def _quietly(self, request: Coroutine[Any, Any, RemotingCommand]) -> None:
        try:
            response = await request
            if response.code != ResponseCode.SUCCESS:
                log.info("%s: %s", self.client_id, response.remark)
        except ClientError as exc:
            log.info("%s: %s", self.client_id, exc)

    # -- requests -------------------------------------------------------------------

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout: float | None = None,
        role: str = "broker",
    ) -> RemotingCommand:
        """One request; no answer raises ClientError (RPC_* code), any answer is returned."""
        wait = self.config.request_timeout_s if timeout is None else timeout
        command = RemotingCommand.request(code, ext_fields, body)
        return await call(self._remoting, address, command, wait, role=role)

    async def invoke_oneway(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        command = RemotingCommand.request(code, ext_fields, body)
        try:
            await self._remoting.invoke_oneway(address, command)
        except Exception as exc:
            raise ClientError(
                f"oneway request to {address} failed ({exc})",
                ResponseCode.RPC_SEND_TO_CHANNEL_FAILED,
            ) from exc

    async def invoke_namesrv(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Ask the name servers in turn (starting at a random one) until one answers."""
        count = len(self._namesrv)
        start = self._namesrv_index
        rotated = [self._namesrv[(start + step) % count] for step in range(count)]

        async def attempt(address: str) -> RemotingCommand:
            response = await self.invoke(address, code, ext_fields, body, role="name server")
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:  # a broker, maybe
                said = await not_a_name_server(
                    address, response, lambda probe: self.invoke(address, probe)
                )
                raise ClientError(said, response.code)
            return response

        step, response = await first_answer(rotated, attempt)
        self._namesrv_index = (start + step) % count
        return response

    # -- routes ---------------------------------------------------------------------

    def cached_route(self, topic: str) -> TopicRoute | None:
        return self._routes.get(topic)

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The route of `topic` (cached; fetched when missing or `refresh`).

        Raises ClientError TOPIC_NOT_EXIST when the name server knows no such topic.
        """
        cached = self._routes.get(topic)
        if cached is not None and not refresh:
            return cached
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            cached = self._routes.get(topic)
            if cached is not None and not refresh:
                return cached
            route = await self.fetch_route(topic)
            self._store_route(topic, route)
            return route

    async def route_if_exists(self, topic: str, who: str) -> TopicRoute | None:
        """The route of `topic`, or None (logged for `who`) when it does not exist
        yet: consumers may start first, as in Java, and the route refresh picks
        the topic up once it is created. Other failures raise."""
        try:
            return await self.route(topic)
        except ClientError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            log.warning("%s: topic %s does not exist yet; waiting for it", who, topic)
            return None

    async def fetch_route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC, uncached; TOPIC_NOT_EXIST if the name server has none."""
        header = GetRouteInfoRequestHeader(topic=topic)
        response = await self.invoke_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, encode_header(header)
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST or (
            response.code == ResponseCode.SUCCESS and not response.body
        ):
            raise ClientError(
                f"no route for topic {topic}: the name server does not know it "
                "(create it with `tidemq topic create` or enable auto-creation)",
                ResponseCode.TOPIC_NOT_EXIST,
            )
        return TopicRoute.from_json(topic, decode_body(check(response), "route"))

    def _store_route(self, topic: str, route: TopicRoute) -> bool:
        """Cache `route`; True (and members told) when it differs from the cached one.

        A broker address not seen before gets a heartbeat at once (then the
        consumers rebalance), so a topic created after a consumer started is
        consumed without waiting for the next heartbeat and rebalance ticks.
        So does an address that has become a master (a promoted slave, which
        a producer-only client never sent a heartbeat to): its transaction
        checks find the producer at once, not after the next 30 s tick.
        """
        known = set(self.broker_addresses(masters_only=False))
        known_masters = set(self.broker_addresses(masters_only=True))
        for broker in route.broker_datas:
            self._broker_addrs[broker.broker_name] = dict(broker.addrs)
        if (
            self._started
            and not self._closed
            and (
                set(self.broker_addresses(masters_only=False)) - known
                or set(self.broker_addresses(masters_only=True)) - known_masters
            )
        ):
            self.spawn(self._greet_new_brokers())
        if self._routes.get(topic) == route:
            return False
        self._routes[topic] = route
        members: list[ProducerMember | ConsumerMember] = [
            *self._producers.values(),
            *self._consumers.values(),
        ]
        for member in members:
            try:
                member.on_route_changed(topic, route)
            except Exception:
                log.exception("%s: route listener of %s failed", self.client_id, member.group)
        return True

    async def _greet_new_brokers(self) -> None:
        await self.send_heartbeat()
        for consumer in list(self._consumers.values()):
            consumer.rebalance_soon()

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for producer in self._producers.values():
            topics.update(producer.published_topics())
        for consumer in self._consumers.values():
            topics.update(consumer.subscribed_topics())
        return topics

    async def refresh_routes(self) -> None:
        """Fetch the route of every topic in use; a topic that vanished keeps its old route."""
        for topic in sorted(self.topics_in_use()):
            try:
                route = await self.fetch_route(topic)
            except ClientError as exc:
                log.debug("%s: route of %s not refreshed: %s", self.client_id, topic, exc)
                continue
            self._store_route(topic, route)

    # -- brokers --------------------------------------------------------------------

    def master_address(self, broker_name: str) -> str | None:
        return self._broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def broker_address(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """The address of `broker_id` of `broker_name`, else of any of its brokers."""
        addrs = self._broker_addrs.get(broker_name, {})
        if broker_id in addrs:
            return addrs[broker_id]
        return next(iter(sorted(addrs.items())), (0, None))[1]

    def find_broker_in_subscribe(
        self, broker_name: str, broker_id: int, *, only_this_broker: bool = False
    ) -> FoundBroker | None:
        """A broker of `broker_name` to read from (MQClientInstance.findBrokerAddressInSubscribe,
        4.9.7): `broker_id`; for a slave id the next one up; then, unless
        `only_this_broker`, any broker of the group (the lowest id: the master
        if it is in the route, else a slave). None when the group is unknown."""
        addrs = self._broker_addrs.get(broker_name)
        if not addrs:
            return None
        for candidate in (broker_id, broker_id + 1) if broker_id != MASTER_ID else (broker_id,):
            if candidate in addrs:
                return FoundBroker(addrs[candidate], broker_id != MASTER_ID)
        if only_this_broker:
            return None
        first_id = min(addrs)
        return FoundBroker(addrs[first_id], first_id != MASTER_ID)

    async def require_subscribe_broker(
        self, broker_name: str, topic: str, broker_id: int = MASTER_ID
    ) -> FoundBroker:
        """`find_broker_in_subscribe` for reading, refreshing `topic`'s route once
        when nothing is found (PullAPIWrapper.pullKernelImpl)."""
        return await self._find_refreshing(broker_name, topic, broker_id, only_at_first=False)

    async def require_offset_broker(self, broker_name: str, topic: str) -> FoundBroker:
        """Where a group's offsets of `broker_name` are read and committed
        (RemoteBrokerOffsetStore): its master; when the master is not in the
        route, even after a refresh, one of its slaves."""
        return await self._find_refreshing(broker_name, topic, MASTER_ID, only_at_first=True)

    async def _find_refreshing(
        self, broker_name: str, topic: str, broker_id: int, *, only_at_first: bool
    ) -> FoundBroker:
        found = self.find_broker_in_subscribe(
            broker_name, broker_id, only_this_broker=only_at_first
        )
        if found is None:
            with contextlib.suppress(ClientError):
                await self.route(topic, refresh=True)
            found = self.find_broker_in_subscribe(broker_name, broker_id)
        if found is None:
            raise ClientError(
                f"broker {broker_name} is in no known route", ResponseCode.BROKER_NOT_EXIST
            )
        return found

    async def require_master(self, broker_name: str, topic: str | None = None) -> str:
        """The master of `broker_name`, refreshing `topic`'s route once if it is unknown."""
        address = self.master_address(broker_name)
        if address is None and topic is not None:
            with contextlib.suppress(ClientError):
                await self.route(topic, refresh=True)
            address = self.master_address(broker_name)
        if address is None:
            raise ClientError(
                f"broker {broker_name} has no master in any known route",
                ResponseCode.BROKER_NOT_EXIST,
            )
        return address

    def broker_addresses(self, *, masters_only: bool = True) -> list[str]:
        return sorted(
            address
            for addrs in self._broker_addrs.values()
            for broker_id, address in addrs.items()
            if broker_id == MASTER_ID or not masters_only
        )

    # -- heartbeat ------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            client_id=self.client_id,
            consumers=tuple(c.consumer_data() for c in self._consumers.values()),
            producer_groups=tuple(self._producers),
        )

    async def send_heartbeat(self) -> None:
        """HEART_BEAT to every known broker (slaves too when a consumer is registered)."""
        if not self._producers and not self._consumers:
            return
        body = self.heartbeat_data().encode()
        addresses = self.broker_addresses(masters_only=not self._consumers)
        await asyncio.gather(
            *(
                self._quietly(self.invoke(address, RequestCode.HEART_BEAT, None, body))
                for address in addresses
            )
        )

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP to a broker serving `topic`: the group's client ids."""
        route = await self.route(topic)
        # MQClientInstance.findBrokerAddrByTopic: a random broker group of the
        # route, its master, else one of its slaves (BrokerData.selectBrokerAddr),
        # so a group whose master is down still rebalances.
        candidates = [
            broker.master or random.choice(list(broker.addrs.values()))
            for broker in route.broker_datas
            if broker.addrs
        ]
        if not candidates:
            raise ClientError(f"topic {topic} has no broker", ResponseCode.BROKER_NOT_EXIST)
        address = random.choice(candidates)
        header = encode_header(GetConsumerListByGroupRequestHeader(consumer_group=group))
        response = await self.invoke(address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header)
        if response.code != ResponseCode.SUCCESS and group in self._consumers:
            # The broker has not heard of this client yet: the topic's route came
            # after the last heartbeat went out (a consumer started right after
            # its topic was created). Java's broker says "no consumer for this
            # group" (ConsumerManageProcessor); say hello, then ask again.
            await self._quietly(
                self.invoke(address, RequestCode.HEART_BEAT, None, self.heartbeat_data().encode())
            )
            response = await self.invoke(address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header)
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(response.remark or f"no consumer list for {group}", response.code)
        document = decode_body(response, "consumer list")
        return sorted(str(c) for c in document.get("consumerIdList") or ())

    # -- requests from brokers -------------------------------------------------------

    async def _on_server_request(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        fields = request.ext_fields or {}
        group = str(fields.get("consumerGroup") or fields.get("group") or "")
        consumer = self._consumers.get(group)
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            if consumer is not None:
                log.info("%s: consumer ids of %s changed", self.client_id, group)
                consumer.rebalance_soon()
            return None
        if request.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            reset = getattr(consumer, "reset_offsets", None)
            if reset is not None:
                reset(str(fields.get("topic") or ""), _reset_offset_table(request.body))
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            running_info = getattr(consumer, "running_info", None)
            if running_info is None:
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"the consumer group {group} is not in this client",
                )
            body = _json_bytes(running_info())
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return await self._consume_directly(request, consumer, group)
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction_state(request, self._address_of(connection))
            return None
        return not_supported(request)

    async def _consume_directly(
        self, request: RemotingCommand, consumer: object, group: str
    ) -> RemotingCommand:
        """A broker forwards an operator's CONSUME_MESSAGE_DIRECTLY with the message as
        its body: the group's push consumer runs its listener over it."""
        if not isinstance(consumer, DirectConsumer):
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{group}> not exist in this consumer",
            )
        try:
            message, _ = decode_record(request.body, decompress=True)
        except (ProtocolError, ValueError) as exc:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"the message cannot be read: {exc}"
            )
        broker_name = str((request.ext_fields or {}).get("brokerName") or "")
        result = await consumer.consume_directly(message, broker_name)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=_json_bytes(result))

    def _address_of(self, connection: Connection) -> str:
        """The pool address of `connection` (so an answer goes back on it), else its peer."""
        for address, pooled in self._remoting.connections.items():
            if pooled is connection:
                return address
        host, port = connection.remote
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _check_transaction_state(self, request: RemotingCommand, broker_address: str) -> None:
        """Hand a broker's transaction check to the producer of the half's group
        (PGROUP); a malformed check or an unknown group is logged and ignored."""
        try:
            header = decode_header(CheckTransactionStateRequestHeader, request.ext_fields or {})
            message, _ = decode_record(request.body, decompress=True)
        except (ProtocolError, ValueError, TypeError) as exc:
            log.warning("%s: malformed CHECK_TRANSACTION_STATE ignored: %s", self.client_id, exc)
            return
        group = message.properties.get(props.PGROUP, "")
        producer: object = self._producers.get(group)
        if not isinstance(producer, TransactionChecker):
            log.info(
                "%s: transaction check of %s for producer group %r ignored: no "
                "transactional producer of that group here",
                self.client_id,
                header.transaction_id or message.msg_id,
                group,
            )
            return
        producer.check_transaction_state(broker_address, message, header)


def _reset_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """ResetOffsetBody {"offsetTable": {mq: offset}} (fastjson object keys accepted)."""
    try:
        document = loads_lenient(body) if body else {}
        table = document.get("offsetTable") or {}
        return {message_queue_key(key): int(value) for key, value in table.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        log.warning("malformed RESET_CONSUMER_CLIENT_OFFSET body: %s", exc)
        return {}


def _json_bytes(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), default=str).encode()
