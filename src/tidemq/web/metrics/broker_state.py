"""The broker's state families, computed when scraped: lag, storage, timers, POP.

- Lag (BrokerMetricsManager.initLagAndDlqMetrics, from tidemq.broker.lag):
  rocketmq_consumer_lag_messages, _lag_latency (ms), _inflight_messages,
  _queueing_latency (ms), _ready_messages; labels consumer_group, topic,
  is_retry, is_system.
- Storage (store/.../metrics/DefaultStoreMetricsManager.java; its samples also
  carry storage_type="local", storage_medium="disk"): rocketmq_storage_size
  (bytes used on the store's file system), _flush_behind_bytes,
  _dispatch_behind_bytes, _message_reserve_time (ms since the oldest stored
  message); the timer gauges rocketmq_timer_enqueue_lag, _enqueue_latency
  (ms), _dequeue_lag, _dequeue_latency (ms), rocketmq_timing_messages, and
  the counters rocketmq_timer_enqueue_total / _dequeue_total per topic.
  RocketMQ keeps rocketmq_timing_messages per topic in a file of its own;
  tidemq's timer files do not know topics, so it is one figure.
- POP (broker/.../metrics/PopMetricsManager.java): rocketmq_pop_revive_lag
  and rocketmq_pop_revive_latency per revive queue (queue_id). RocketMQ gives
  the lag the unit "milliseconds" though it counts messages, so the name
  reads rocketmq_pop_revive_lag_milliseconds; tidemq serves the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client.metrics_core import Metric

from tidemq.broker.groups import is_system_group
from tidemq.broker.lag import GroupLag
from tidemq.broker.topics import is_system_topic
from tidemq.web.metrics.exposition import Exposition, Labels, bool_label

if TYPE_CHECKING:
    from tidemq.broker.pop.engine import BrokerPop
    from tidemq.broker.timers import BrokerTimers

__all__ = ["StorageFigures", "lag_families", "pop_families", "storage_families"]

STORE_LABELS: Labels = {"storage_type": "local", "storage_medium": "disk"}
"""DefaultStoreMetricsManager.newAttributesBuilder's own labels."""


class StorageFigures(Protocol):
    """What the storage gauges read of the store (tidemq.store.file_store)."""

    def disk_used_bytes(self) -> int: ...

    def flush_behind_bytes(self) -> int: ...

    def dispatch_behind_bytes(self) -> int: ...

    def earliest_message_time(self) -> int: ...


@dataclass(frozen=True, slots=True)
class _LagFamily:
    instrument: str
    documentation: str
    field: str
    unit: str = ""


_LAG_FAMILIES = (
    _LagFamily("rocketmq_consumer_lag_messages", "Consumer lag messages", "lag"),
    _LagFamily(
        "rocketmq_consumer_lag_latency", "Consumer lag time", "lag_latency_ms", "milliseconds"
    ),
    _LagFamily("rocketmq_consumer_inflight_messages", "Consumer inflight messages", "inflight"),
    _LagFamily(
        "rocketmq_consumer_queueing_latency",
        "Consumer queueing time",
        "queueing_latency_ms",
        "milliseconds",
    ),
    _LagFamily("rocketmq_consumer_ready_messages", "Consumer ready messages", "ready"),
)


def _lag_labels(row: GroupLag) -> Labels:
    return {
        "consumer_group": row.group,
        "topic": row.topic,
        "is_retry": bool_label(row.is_retry),
        "is_system": bool_label(is_system_topic(row.topic) or is_system_group(row.group)),
    }


def lag_families(exposition: Exposition, rows: list[GroupLag]) -> list[Metric]:
    labelled = [(_lag_labels(row), row) for row in rows]
    return [
        exposition.gauge(
            family.instrument,
            family.documentation,
            ((labels, getattr(row, family.field)) for labels, row in labelled),
            family.unit,
        )
        for family in _LAG_FAMILIES
    ]


def storage_families(
    exposition: Exposition,
    store: StorageFigures,
    timers: BrokerTimers | None,
    now_ms: int,
) -> list[Metric]:
    one = [STORE_LABELS]
    families = [
        exposition.gauge(
            "rocketmq_storage_size",
            "Broker storage size",
            ((labels, store.disk_used_bytes()) for labels in one),
            "bytes",
        ),
        exposition.gauge(
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            ((labels, store.flush_behind_bytes()) for labels in one),
            "bytes",
        ),
        exposition.gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            ((labels, store.dispatch_behind_bytes()) for labels in one),
            "bytes",
        ),
    ]
    earliest = store.earliest_message_time()
    families.append(
        exposition.gauge(
            "rocketmq_storage_message_reserve_time",
            "Broker message reserve time",
            [(STORE_LABELS, now_ms - earliest)] if earliest > 0 else [],
            "milliseconds",
        )
    )
    if timers is not None:
        families.extend(_timer_families(exposition, timers, now_ms))
    return families


def _timer_families(exposition: Exposition, timers: BrokerTimers, now_ms: int) -> list[Metric]:
    lag = timers.engine.lag(now_ms)
    gauges = (
        ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", lag.enqueue_lag, ""),
        (
            "rocketmq_timer_enqueue_latency",
            "Timer enqueue latency",
            lag.enqueue_latency_ms,
            "milliseconds",
        ),
        ("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", lag.dequeue_lag, ""),
        (
            "rocketmq_timer_dequeue_latency",
            "Timer dequeue latency",
            lag.dequeue_latency_ms,
            "milliseconds",
        ),
        ("rocketmq_timing_messages", "Current message number in timing", lag.timing, ""),
    )
    families = [
        exposition.gauge(name, documentation, [(STORE_LABELS, value)], unit)
        for name, documentation, value, unit in gauges
    ]
    families.append(
        exposition.counter(
            "rocketmq_timer_enqueue_total",
            "Total number of timer enqueue",
            (({**STORE_LABELS, "topic": t}, n) for t, n in sorted(timers.enqueued.items())),
        )
    )
    families.append(
        exposition.counter(
            "rocketmq_timer_dequeue_total",
            "Total number of timer dequeue",
            (({**STORE_LABELS, "topic": t}, n) for t, n in sorted(timers.dequeued.items())),
        )
    )
    return families


def pop_families(exposition: Exposition, pop: BrokerPop, now_ms: int) -> list[Metric]:
    behind, latency = pop.revive_lag(now_ms)
    queue = {"queue_id": "0"}
    return [
        exposition.gauge(
            "rocketmq_pop_revive_lag",
            "The processing lag of revive topic",
            [(queue, behind)],
            "milliseconds",
        ),
        exposition.gauge(
            "rocketmq_pop_revive_latency",
            "The processing latency of revive topic",
            [(queue, latency)],
            "milliseconds",
        ),
    ]
