"""Which brokers' queues a RocketMQ 5 client is shown, and where to reach them.

RocketMQ's proxy in local mode (one in each broker) answers QueryRoute from the
name server's route: every broker of the topic, each at its own gRPC endpoint
(proxy/.../service/route/LocalTopicRouteService.getTopicRouteForProxy), so a
client given one broker's endpoint sends to, and receives from, all of them.
Java assumes every broker's gRPC port is the same; here each broker says where
its endpoint listens in its runtime info (`tidemqGrpcAddress`), which is read
once per broker address and kept.

`broker_queues` is the pure part: a TopicRouteData JSON object and what is known
of the brokers' gRPC addresses, to the queues a client may use. `ClusterRoutes`
fetches both, caches a topic's route for `ttl_s` (a permission wiped, or a
broker gone, shows within that) and answers None when no name server can tell,
so the endpoint falls back to its own broker's queues.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.common.clock import Clock
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import RemotingClient, RemotingError

__all__ = ["GRPC_ADDRESS_KEY", "BrokerQueues", "ClusterRoutes", "broker_queues", "endpoints_of"]

log = logging.getLogger(__name__)

GRPC_ADDRESS_KEY = "tidemqGrpcAddress"
"""GET_BROKER_RUNTIME_INFO's key for "host:port" of a broker's gRPC endpoint."""
_MASTER_ID = "0"
_CALL_TIMEOUT_S = 3.0
_MISSING_RETRY_S = 10.0


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker's queues of a topic, as a client is shown them."""

    broker_name: str
    grpc_address: str | None
    """ "host:port" of its gRPC endpoint; None: the broker answering."""
    read_queue_nums: int
    write_queue_nums: int
    perm: int


def broker_queues(
    route: Mapping[str, Any], own_address: str, grpc_of: Mapping[str, str]
) -> list[BrokerQueues]:
    """The queues of `route` (TopicRouteData JSON) a client can reach: each broker
    with a master, at its gRPC address (`grpc_of`: remoting address -> gRPC
    address); the broker at `own_address` as None; brokers without a known gRPC
    endpoint are left out."""
    masters: dict[str, str] = {}
    for data in route.get("brokerDatas") or ():
        addrs = data.get("brokerAddrs") or {}
        master = addrs.get(_MASTER_ID) or addrs.get(int(_MASTER_ID))
        if master:
            masters[str(data.get("brokerName"))] = str(master)
    found: list[BrokerQueues] = []
    for queue in route.get("queueDatas") or ():
        name = str(queue.get("brokerName"))
        master = masters.get(name)
        if master is None:
            continue
        grpc = None if master == own_address else grpc_of.get(master)
        if master != own_address and grpc is None:
            continue
        found.append(
            BrokerQueues(
                name,
                grpc,
                int(queue.get("readQueueNums") or 0),
                int(queue.get("writeQueueNums") or 0),
                int(queue.get("perm") or 0),
            )
        )
    return sorted(found, key=lambda b: b.broker_name)


def endpoints_of(address: str) -> pb.Endpoints:
    """ "host:port" as a client's Endpoints: IPv4 or IPv6 for an address, else a
    domain name."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        family = ipaddress.ip_address(host).version
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    else:
        scheme = pb.AddressScheme.IPv4 if family == 4 else pb.AddressScheme.IPv6
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=int(port))])


class ClusterRoutes:
    """Routes from the name servers, and the gRPC addresses of the brokers in them."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        client: RemotingClient,
        own_address: Callable[[], str],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
    ) -> None:
        self.namesrv_addrs = list(namesrv_addrs)
        self.client = client
        self.own_address = own_address
        self.ttl_s = ttl_s
        self._monotonic = clock.monotonic
        self._routes: dict[str, tuple[float, Mapping[str, Any] | None]] = {}
        self._grpc: dict[str, str] = {}
        self._grpc_missing: dict[str, float] = {}

    async def queues(self, topic: str) -> list[BrokerQueues] | None:
        """The topic's queues across the cluster; None when no name server answers
        (or knows the topic): the caller then shows its own broker's queues."""
        route = await self._route(topic)
        if route is None:
            return None
        own = self.own_address()
        for data in route.get("brokerDatas") or ():
            master = (data.get("brokerAddrs") or {}).get(_MASTER_ID)
            if master and master != own and master not in self._grpc:
                await self._learn_grpc(str(master))
        return broker_queues(route, own, self._grpc)

    async def _route(self, topic: str) -> Mapping[str, Any] | None:
        now = self._monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        route = await self._ask_namesrv(topic)
        self._routes[topic] = (now, route)
        if len(self._routes) > 10_000:  # topics come and go: keep the table bounded
            self._routes.clear()
        return route

    async def _ask_namesrv(self, topic: str) -> Mapping[str, Any] | None:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        for address in self.namesrv_addrs:
            try:
                response = await self.client.invoke(address, request, _CALL_TIMEOUT_S)
            except RemotingError:
                continue
            if response.code != ResponseCode.SUCCESS:
                return None
            try:
                document = json.loads(response.body)
            except ValueError:
                return None
            return document if isinstance(document, dict) else None
        return None

    async def _learn_grpc(self, broker_addr: str) -> None:
        if self._monotonic() - self._grpc_missing.get(broker_addr, -_MISSING_RETRY_S) < (
            _MISSING_RETRY_S
        ):
            return
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            response = await self.client.invoke(broker_addr, request, _CALL_TIMEOUT_S)
            table = json.loads(response.body).get("table") or {}
        except (RemotingError, ValueError, AttributeError) as exc:
            log.info("the gRPC address of broker %s is not known: %s", broker_addr, exc)
            self._grpc_missing[broker_addr] = self._monotonic()
            return
        address = table.get(GRPC_ADDRESS_KEY) if response.code == ResponseCode.SUCCESS else None
        if isinstance(address, str) and address:
            self._grpc[broker_addr] = address
            self._grpc_missing.pop(broker_addr, None)
        else:
            self._grpc_missing[broker_addr] = self._monotonic()
