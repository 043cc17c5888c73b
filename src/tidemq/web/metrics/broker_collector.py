"""The broker's prometheus_client collector: every family, built when scraped.

Nothing here runs on the request path: `collect()` reads the counters the
broker keeps anyway (tidemq.broker.stats, the servers' RpcStats, the timer,
POP and transaction tables) and what it computes from its tables (lag,
storage, connections). Common labels, as BrokerMetricsManager.init sets them:
cluster (the cluster name), node_type "broker", node_id (the broker name),
plus `metrics_label`'s. RocketMQ adds aggregation="delta" only when it
exports deltas over OTLP; a Prometheus scrape is cumulative, so it is never
there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from prometheus_client.metrics_core import Metric

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.lag import LagSources, consumer_lag
from tidemq.broker.transactions import BrokerTransactions
from tidemq.common.clock import Clock
from tidemq.common.rpc_stats import RpcStats
from tidemq.web.metrics.broker_state import (
    StorageFigures,
    lag_families,
    pop_families,
    storage_families,
)
from tidemq.web.metrics.broker_traffic import (
    ConsumerClient,
    client_families,
    traffic_families,
    transaction_families,
)
from tidemq.web.metrics.exposition import Exposition
from tidemq.web.metrics.rpc import rpc_latency

__all__ = ["BrokerCollector", "RenewalFigures", "broker_labels"]


class RenewalFigures(Protocol):
    """What the gRPC endpoint's receipt renewals count (tidemq.grpc.renewal)."""

    renewed: int
    given_back: int
    cleared: int

    def __len__(self) -> int: ...


def broker_labels(
    cluster: str, broker_name: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The labels every broker sample carries."""
    return {**(extra or {}), "node_type": "broker", "cluster": cluster, "node_id": broker_name}


class BrokerCollector:
    """`collect()`: the families of one broker (see the module docstring)."""

    def __init__(
        self,
        core: BrokerCore,
        store: StorageFigures,
        clock: Clock,
        *,
        rpc: Sequence[RpcStats] = (),
        other_consumers: Callable[[], Sequence[ConsumerClient]] | None = None,
        renewals: RenewalFigures | None = None,
        unit_suffix: bool = True,
    ) -> None:
        config = core.service.config
        self.core = core
        self.store = store
        self.clock = clock
        self.rpc = tuple(rpc)
        self.other_consumers = other_consumers
        self.renewals = renewals
        self.exposition = Exposition(
            broker_labels(config.cluster_name, config.broker_name, config.metrics_labels),
            unit_suffix,
        )

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families depend on what the broker holds, and the name
        server's collector may share the registry (`rocketmq_rpc_latency`)."""
        return ()

    def collect(self) -> Iterable[Metric]:
        core, exposition = self.core, self.exposition
        service = core.service
        now_ms = self.clock.now_ms()
        families = [
            exposition.gauge(
                "rocketmq_broker_permission", "Broker permission", [({}, service.permission.value)]
            ),
            exposition.gauge(
                "rocketmq_topic_number", "Active topic number", [({}, len(service.topics))]
            ),
            exposition.gauge(
                "rocketmq_consumer_group_number",
                "Active subscription group number",
                [({}, len(service.groups.names()))],
            ),
        ]
        families += traffic_families(exposition, service.stats)
        families += client_families(
            exposition, service.producers, service.consumers, self.other_consumers
        )
        lag = consumer_lag(
            LagSources(
                store=service.store,
                topics=service.topics,
                groups=service.groups,
                offsets=service.offsets,
                consumers=service.consumers,
                stats=service.stats,
                pop=core.pop_engine,
            ),
            now_ms,
        )
        families += lag_families(exposition, lag)
        waiting = core.transactions.waiting if core.transactions is not None else {}
        families += transaction_families(exposition, service.stats, waiting)
        families += storage_families(exposition, self.store, core.timers, now_ms)
        if core.pop_engine is not None:
            families += pop_families(exposition, core.pop_engine, now_ms)
        families.append(rpc_latency(exposition, self.rpc))
        if core.transactions is not None:
            families.append(self._checks(core.transactions))
        if self.renewals is not None:
            families += self._renewals(self.renewals)
        return families

    def _renewals(self, renewals: RenewalFigures) -> list[Metric]:
        """tidemq's own: push consumers' messages the broker keeps invisible for them."""
        return [
            self.exposition.gauge(
                "tidemq_grpc_held_messages",
                "Messages gRPC push consumers hold, renewed while they do",
                [({}, len(renewals))],
            ),
            self.exposition.counter(
                "tidemq_grpc_renewals_total",
                "What renewing held messages did, by outcome",
                (
                    ({"result": "renewed"}, renewals.renewed),
                    ({"result": "given_back"}, renewals.given_back),
                    ({"result": "cleared"}, renewals.cleared),
                ),
            ),
        ]

    def _checks(self, transactions: BrokerTransactions) -> Metric:
        """tidemq's own: what the transaction check-back did since start (RocketMQ has none)."""
        totals = transactions.check_back.totals
        return self.exposition.counter(
            "tidemq_transaction_checks_total",
            "Half messages the check-back dealt with, by outcome",
            (
                ({"result": "checked"}, totals.checked),
                ({"result": "sent"}, totals.sent),
                ({"result": "requeued"}, totals.requeued),
                ({"result": "discarded"}, totals.discarded),
            ),
        )
