"""How the servers' metrics are put together (the composition root's part).

Each server that measures gets its own `RpcStats` (the remoting port, the
gRPC endpoint, a name server), handed to it when it is built; the
collectors that read them (tidemq.web.metrics) go into the registry /metrics
serves. Only here are the broker, the gRPC endpoint, the name server and the
web layer known together: gRPC consumers, which the broker's consumer table
does not hold, reach rocketmq_consumer_connections through
`grpc_consumers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry

from tidemq.common.rpc_stats import RpcStats
from tidemq.grpc.servicer import MessagingServicer
from tidemq.namesrv.app import NameServer
from tidemq.protocol.codes import request_code_label, response_code_label
from tidemq.web.metrics import ConsumerClient, NamesrvCollector

__all__ = ["grpc_consumers", "register_namesrv", "remoting_rpc_stats"]

_GRPC_CONSUME_MODES = {"pull_consumer": "pull"}
"""A 5.x push or simple consumer receives by POP; only the pull consumer pulls."""


def remoting_rpc_stats() -> RpcStats:
    """RPC latencies of a remoting port, labelled by RocketMQ's code names."""
    return RpcStats("remoting", request_code_label, response_code_label)


def grpc_consumers(servicer: MessagingServicer) -> Callable[[], list[ConsumerClient]]:
    """The gRPC consumers of `servicer`, as rocketmq_consumer_connections counts them."""

    def clients() -> list[ConsumerClient]:
        return [
            ConsumerClient(
                group=group,
                language=language,
                version="v" + version.replace(".", "_").lower(),
                consume_mode=_GRPC_CONSUME_MODES.get(client_type, "pop"),
                protocol_type="grpc",
            )
            for group, language, version, client_type in servicer.consumer_sessions()
        ]

    return clients


def register_namesrv(
    registry: CollectorRegistry,
    namesrv: NameServer,
    address: str,
    rpc: RpcStats | None,
    *,
    unit_suffix: bool = True,
    extra_labels: Mapping[str, str] | None = None,
) -> None:
    """Put a name server's families in `registry` (its own, or a broker's in
    `tidemq serve`, where one /metrics shows both)."""
    registry.register(
        NamesrvCollector(namesrv, address, rpc, unit_suffix=unit_suffix, extra_labels=extra_labels)
    )
