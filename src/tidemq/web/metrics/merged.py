"""One family per name in an exposition, however many collectors built it.

`tidemq serve` runs a name server and a broker in one process, and both
serve rocketmq_rpc_latency (with their own node_type and node_id): two
collectors of one registry yield a family of the same name, and the text
format allows one `# TYPE` line per name. `MergedFamilies` joins them
(their samples differ by labels) before `generate_latest` writes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["MergedFamilies"]


class MergedFamilies:
    """A registry's families with those of the same name and type merged."""

    def __init__(self, registry: Collector) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        for family in self.registry.collect():
            seen = merged.get(family.name)
            if seen is None:
                merged[family.name] = family
            elif seen.type == family.type:
                seen.samples.extend(family.samples)
            else:  # the same name with another type: not ours to join (none here do)
                merged[f"{family.name} {family.type}"] = family
        return list(merged.values())
