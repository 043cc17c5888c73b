"""The name server's collector (RocketMQ's name server exports no metrics).

apache/rocketmq's namesrv module has no metrics at all (no meter, no
exporter; users ask for one: apache/rocketmq-exporter issue #126), while
RocketMQ's metrics documentation lists "nameserver" among the node_type
values. tidemq's name server serves, with node_type="nameserver" and
node_id its address:

- rocketmq_rpc_latency of its remoting port, named as the broker's
  (request_code "get_routeinfo_by_topic", "register_broker", ...);
- tidemq_nameserver_brokers{cluster}: live brokers per cluster;
- tidemq_nameserver_topics: topics with a route;
- tidemq_nameserver_expired_brokers_total: brokers removed for not
  registering within 120 s, since start.

The tidemq_ prefix marks what RocketMQ does not define.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.metrics_core import Metric

from tidemq.common.rpc_stats import RpcStats
from tidemq.namesrv.app import NameServer
from tidemq.web.metrics.exposition import Exposition
from tidemq.web.metrics.rpc import rpc_latency

__all__ = ["NamesrvCollector"]


class NamesrvCollector:
    """`collect()`: the families of one name server (see the module docstring)."""

    def __init__(
        self,
        namesrv: NameServer,
        address: str,
        rpc: RpcStats | None = None,
        *,
        unit_suffix: bool = True,
        extra_labels: Mapping[str, str] | None = None,
    ) -> None:
        self.namesrv = namesrv
        self.rpc = rpc
        self.exposition = Exposition(
            {**(extra_labels or {}), "node_type": "nameserver", "node_id": address}, unit_suffix
        )

    def describe(self) -> Iterable[Metric]:
        """Nothing (its rocketmq_rpc_latency may share a registry with a broker's)."""
        return ()

    def collect(self) -> Iterable[Metric]:
        routes = self.namesrv.routes
        clusters: dict[str, int] = {}
        for record in routes.brokers():
            clusters[record.cluster] = clusters.get(record.cluster, 0) + 1
        exposition = self.exposition
        return [
            exposition.gauge(
                "tidemq_nameserver_brokers",
                "Live brokers registered, per cluster",
                (({"cluster": cluster}, count) for cluster, count in sorted(clusters.items())),
            ),
            exposition.gauge(
                "tidemq_nameserver_topics", "Topics with a route", [({}, len(routes.all_topics()))]
            ),
            exposition.counter(
                "tidemq_nameserver_expired_brokers_total",
                "Brokers removed for not registering in time",
                [({}, self.namesrv.expired_brokers)],
            ),
            rpc_latency(exposition, [self.rpc] if self.rpc is not None else []),
        ]
