"""Metric families as RocketMQ 5's Prometheus endpoint names and labels them.

RocketMQ defines its metrics as OpenTelemetry instruments (name, unit) and
serves them through OpenTelemetry Java's Prometheus exporter, 1.29.0 since
RocketMQ 5.1.4 (apache/rocketmq pom.xml `opentelemetry.version`). That
exporter (opentelemetry-java v1.29.0, exporters/prometheus
PrometheusMetricNameMapper + PrometheusUnitsHelper + Serializer):

- appends the unit when the name does not hold it already:
  "milliseconds" -> rocketmq_rpc_latency_milliseconds, "bytes" ->
  rocketmq_storage_size_bytes (rocketmq_storage_flush_behind_bytes stays);
  RocketMQ 5.1.0-5.1.3 (OpenTelemetry 1.19/1.26) did not, and RocketMQ's
  documentation lists the bare names: `unit_suffix=False` serves those;
- adds `_total` to a counter's samples unless the name holds "total" (all of
  RocketMQ's counters are named ..._total already);
- writes a histogram as `_bucket{le=...}`, `_count` and `_sum` samples.

It also puts otel_scope_name="broker-meter" on every sample and a
target_info line, which are the exporter's, not RocketMQ's; they are left
out. The families here are built from plain label dicts so that one family
can hold samples with different label sets (RocketMQ's POP deliveries carry
is_retry, its pulls do not), which prometheus_client's typed families do not
allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from tidemq.common.histogram import Histogram

__all__ = ["Exposition", "Labels", "bool_label", "le_label"]

Labels = Mapping[str, str]


def le_label(bound: float) -> str:
    """A bucket bound as the `le` label: "1.0", "4194304.0", "+Inf" (Java's
    Double.toString, which RocketMQ's exporter writes, below 10^7)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


def bool_label(value: bool) -> str:
    """How an OpenTelemetry boolean attribute reads as a label: "true"/"false"."""
    return "true" if value else "false"


@dataclass(frozen=True, slots=True)
class Exposition:
    """Builds the families of one node: its common labels on every sample,
    names as RocketMQ's exporter renders them (see the module docstring)."""

    common: Labels
    """cluster, node_type, node_id (and metrics_label's extras)."""
    unit_suffix: bool = True

    def name(self, instrument: str, unit: str = "") -> str:
        """The family name of an instrument with `unit` ("milliseconds", "bytes", "")."""
        if self.unit_suffix and unit and unit not in instrument:
            return f"{instrument}_{unit}"
        return instrument

    def _labels(self, labels: Labels) -> dict[str, str]:
        return {**self.common, **labels}

    def gauge(
        self,
        instrument: str,
        documentation: str,
        rows: Iterable[tuple[Labels, float]],
        unit: str = "",
    ) -> Metric:
        family = Metric(self.name(instrument, unit), documentation, "gauge")
        for labels, value in rows:
            family.add_sample(family.name, self._labels(labels), value)
        return family

    def counter(
        self,
        instrument: str,
        documentation: str,
        rows: Iterable[tuple[Labels, float]],
        unit: str = "",
    ) -> Metric:
        """A counter; `instrument` ends in _total as RocketMQ names them."""
        name = self.name(instrument, unit)
        family = Metric(name.removesuffix("_total"), documentation, "counter")
        for labels, value in rows:
            family.add_sample(f"{family.name}_total", self._labels(labels), value)
        return family

    def histogram(
        self,
        instrument: str,
        documentation: str,
        rows: Iterable[tuple[Labels, Histogram]],
        unit: str = "",
    ) -> Metric:
        family = Metric(self.name(instrument, unit), documentation, "histogram")
        name = family.name
        for labels, histogram in rows:
            full = self._labels(labels)
            for bound, count in histogram.cumulative():
                family.add_sample(f"{name}_bucket", {**full, "le": le_label(bound)}, count)
            family.add_sample(f"{name}_count", full, histogram.count)
            family.add_sample(f"{name}_sum", full, histogram.total)
        return family
