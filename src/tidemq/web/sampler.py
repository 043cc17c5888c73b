"""The history sampler: every `interval_s` it reads the broker and adds
points to the History (history.py); started and stopped with the HTTP endpoint.

What it reads comes from a `Reading` source: `local_reading` reads the
broker this process runs (its own counters and offsets, no request, no ACL
check: the sampler acts for nobody). Each broker keeps the history of its
own queues; a cluster has a dashboard on each broker that turns it on.

Series names: ``broker:<name>:put`` and ``broker:<name>:get`` (messages a
second), ``topic:<name>:put`` (messages a second), ``group:<name>:lag``
(messages not yet consumed, summed over the group's queues).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.broker.assembly import BrokerCore
from tidemq.common.clock import Clock
from tidemq.common.tasks import TaskSet
from tidemq.web.history import CounterRates, History

__all__ = ["DEFAULT_INTERVAL_S", "Reading", "Sampler", "local_reading"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 5.0
MAX_GROUPS = 500
MAX_TOPICS = 1000


@dataclass(frozen=True, slots=True)
class Reading:
    """One look at a broker: counters since its start and current lags."""

    brokers: dict[str, tuple[int, int]] = field(default_factory=dict)
    """broker name -> (messages put, messages got) since start."""
    topics: dict[str, int] = field(default_factory=dict)
    """topic -> messages put since start."""
    groups: dict[str, int] = field(default_factory=dict)
    """consumer group -> lag (messages stored, not yet consumed)."""


def local_reading(core: BrokerCore) -> Reading:
    """The counters and lags of the broker `core` is (see the module docstring)."""
    service = core.service
    stats = service.stats
    name = service.config.broker_name
    topics = {topic: counter.rate.total for topic, counter in list(stats.puts.items())[:MAX_TOPICS]}
    groups: dict[str, int] = {}
    for key in service.offsets.all_offsets():
        _, _, group = key.partition("@")
        if group and group not in groups and len(groups) < MAX_GROUPS:
            table = core.admin.consume_stats(group).get("offsetTable", {})
            groups[group] = sum(
                max(0, int(q["brokerOffset"]) - max(0, int(q["consumerOffset"])))
                for q in table.values()
            )
    return Reading({name: (stats.all_puts.total, stats.all_gets.total)}, topics, groups)


class Sampler:
    """Reads `source` every `interval_s` into `history` (see the module docstring)."""

    def __init__(
        self,
        source: Callable[[], Reading],
        history: History,
        clock: Clock,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("the sampling interval must be positive")
        self.history = history
        self.interval_s = interval_s
        self._source = source
        self._clock = clock
        self._rates = CounterRates(history)
        self._tasks = TaskSet("dashboard-sampler")
        self.last_error: str | None = None
        self.samples = 0

    def sample_once(self) -> None:
        """Read once and add the points (rates appear from the second reading on)."""
        reading = self._source()
        now = self._clock.now_ms()
        counters: list[str] = []
        for broker, (put, get) in reading.brokers.items():
            for kind, total in (("put", put), ("get", get)):
                name = f"broker:{broker}:{kind}"
                counters.append(name)
                self._rates.read(name, now, total)
        for topic, total in reading.topics.items():
            name = f"topic:{topic}:put"
            counters.append(name)
            self._rates.read(name, now, total)
        for group, lag in reading.groups.items():
            self.history.add(f"group:{group}:lag", now, lag)
        self._rates.keep_only(counters)
        self.samples += 1

    async def _run(self) -> None:
        while True:
            try:
                self.sample_once()
            except Exception as exc:  # a table changing under us, say: next time
                if self.last_error is None:
                    log.exception("dashboard sampler: reading the broker failed")
                self.last_error = f"{type(exc).__name__}: {exc}"
            else:
                self.last_error = None
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._tasks.spawn(self._run())

    async def stop(self) -> None:
        await self._tasks.cancel_all()
