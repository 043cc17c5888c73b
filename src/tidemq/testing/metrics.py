"""Reading a /metrics page in tests: scrape it, find samples by name and labels.

The page is parsed with prometheus_client's own parser, so a test reads what
Prometheus would, not what a regular expression happens to match.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

__all__ = ["family", "sample_value", "samples", "scrape"]


def scrape(address: str, timeout: float = 10.0) -> list[Metric]:
    """GET http://`address`/metrics, parsed (blocking: wrap in asyncio.to_thread)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as response:
        text = response.read().decode()
    return list(text_string_to_metric_families(text))


def samples(families: list[Metric], name: str, **labels: str) -> list[Sample]:
    """The samples called `name` whose labels include `labels`."""
    return [
        sample
        for family in families
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]


def sample_value(families: list[Metric], name: str, **labels: str) -> float | None:
    """The value of the one sample `name` with `labels`; None when there is
    none; AssertionError when several match (the labels do not pick one)."""
    found = samples(families, name, **labels)
    if not found:
        return None
    assert len(found) == 1, f"{len(found)} samples of {name} match {labels}: {found}"
    return found[0].value


def family(families: list[Metric], name: str) -> Metric | None:
    """The family called `name` (for a counter: without _total)."""
    return next((f for f in families if f.name == name), None)
