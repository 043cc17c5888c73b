"""How far each consumer group is behind, per topic: RocketMQ's lag figures.

RocketMQ 5 (broker/.../metrics/ConsumerLagCalculator.java) reports, per
consumer group and topic, with a second row (`is_retry`) for a POP group's
retry topic:

- lag: messages not consumed yet, max offset - committed offset (a POP
  group: - pop offset + those popped and not acked);
- lag latency: how old the oldest of those is (now - its store time);
- in flight: handed out and not committed (pull offset - committed offset; a
  POP group: popped and not acked);
- ready: stored and not handed out yet (max offset - pull offset);
- queueing latency: how old the oldest ready message is.

RocketMQ learns which groups to report from its consumer table, and keeps a
group whose consumers went away (the "compensation" table); tidemq reports
every group with live consumers (their subscriptions) and every group of the
subscription group table with committed offsets, so a stopped group still
shows its lag. Retry topics are not rows of their own (as Java). A group
consumes by POP when its heartbeat says so, when it popped since this start,
or when its POP retry topic exists. A queue
whose pull offset this broker has not seen since it started, or whose group
has no live consumer, counts its committed offset as pulled (Java: nothing
pulled, nothing ready; a pull offset kept after the consumers left).

Everything is read when asked (a scrape): a few offsets and one record
header per queue; nothing is counted on the consume path but the pull offset
(BrokerStats.record_get).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemq.broker.offsets import split_offset_key
from tidemq.broker.pop.engine import pop_retry_topic
from tidemq.common.names import is_retry_topic

if TYPE_CHECKING:
    from tidemq.broker.consumers import ConsumerManager
    from tidemq.broker.groups import SubscriptionGroupManager
    from tidemq.broker.offsets import ConsumerOffsetManager
    from tidemq.broker.pop.engine import BrokerPop
    from tidemq.broker.stats import BrokerStats
    from tidemq.broker.topics import TopicConfigManager
    from tidemq.store.api import MessageStore

__all__ = ["GroupLag", "LagSources", "consumer_lag"]

CONSUME_POP = "CONSUME_POP"
"""The consumeType of a POP consumer's heartbeat (Java's ConsumeType.CONSUME_POP)."""


@dataclass(frozen=True, slots=True)
class GroupLag:
    """One (group, topic) row; `is_retry`: the POP retry topic's share."""

    group: str
    topic: str
    is_retry: bool
    lag: int
    lag_latency_ms: int
    inflight: int
    queueing_latency_ms: int
    ready: int


@dataclass(frozen=True, slots=True)
class LagSources:
    """The broker parts the lag is read from."""

    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    stats: BrokerStats
    pop: BrokerPop | None = None


@dataclass(slots=True)
class _Queue:
    """One queue's figures, before they are summed per group and topic; the
    store times (ms) of its oldest unconsumed and oldest ready message, 0 for none."""

    lag: int = 0
    oldest_unconsumed_ms: int = 0
    inflight: int = 0
    ready: int = 0
    oldest_ready_ms: int = 0


def _store_time(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    stored = store.store_time(topic, queue_id, offset)
    return stored if stored > 0 else 0


def _pairs(sources: LagSources) -> tuple[set[tuple[str, str]], set[str]]:
    """The (group, topic) pairs to report, and which groups consume by POP."""
    pairs: set[tuple[str, str]] = set()
    pop_groups: set[str] = set()
    consumers = sources.consumers
    for group in consumers.groups():
        info = consumers.get(group)
        if info is None:
            continue
        if info.consume_type == CONSUME_POP:
            pop_groups.add(group)
        pairs.update((group, topic) for topic in info.subscriptions)
    for key in sources.offsets.all_offsets():
        parts = split_offset_key(key)
        if parts is not None and parts[1] in sources.groups:
            pairs.add((parts[1], parts[0]))
    if sources.pop is not None:
        for group, topic, _, _ in sources.pop.in_flight():
            pop_groups.add(group)
            pairs.add((group, topic))
        for topic, group, _ in sources.stats.pops:
            pop_groups.add(group)
            pairs.add((group, topic))
    pairs = {(g, t) for g, t in pairs if not is_retry_topic(t)}
    # a group that popped before this start: its POP retry topic exists
    pop_groups.update(g for g, t in pairs if pop_retry_topic(g, t) in sources.topics)
    return pairs, pop_groups


def consumer_lag(sources: LagSources, now_ms: int) -> list[GroupLag]:
    """Every reported (group, topic) row, sorted (see the module docstring)."""
    pairs, pop_groups = _pairs(sources)
    unacked = sources.pop.in_flight() if sources.pop is not None else {}
    rows: list[GroupLag] = []
    for group, topic in sorted(pairs):
        config = sources.topics.get(topic)
        if config is None:
            continue
        queue_ids = range(config.write_queue_nums)
        if group not in pop_groups:
            live = sources.consumers.get(group) is not None
            queues = [_pull_queue(sources, group, topic, q, live) for q in queue_ids]
            rows.append(_row(group, topic, False, now_ms, queues))
            continue
        queues = [
            _pop_queue(sources, group, topic, q, unacked.get((group, topic, q, False)))
            for q in queue_ids
        ]
        rows.append(_row(group, topic, False, now_ms, queues))
        retry = pop_retry_topic(group, topic)
        retry_queue = _pop_queue(sources, group, retry, 0, unacked.get((group, topic, 0, True)))
        rows.append(_row(group, topic, True, now_ms, [retry_queue]))
    return rows


def _pull_queue(sources: LagSources, group: str, topic: str, queue_id: int, live: bool) -> _Queue:
    """A pulling group's queue; without `live` consumers nothing is in flight
    (a pull held for a consumer that left may still have read ahead)."""
    store = sources.store
    max_offset = store.max_offset(topic, queue_id)
    committed = sources.offsets.query(group, topic, queue_id)
    if committed < 0:
        committed = max_offset
    pulled = committed
    if live:
        pulled = max(sources.stats.pulled(topic, group).get(queue_id, committed), committed)
    pulled = min(pulled, max_offset)
    figures = _Queue(
        lag=max(0, max_offset - committed),
        inflight=max(0, pulled - committed),
        ready=max(0, max_offset - pulled),
    )
    if figures.lag:
        figures.oldest_unconsumed_ms = _store_time(store, topic, queue_id, committed)
    if figures.ready:
        figures.oldest_ready_ms = _store_time(store, topic, queue_id, pulled)
    return figures


def _pop_queue(
    sources: LagSources, group: str, queue_topic: str, queue_id: int, unacked: list[int] | None
) -> _Queue:
    """A POP group's queue: its committed offset is where the next pop starts."""
    store = sources.store
    max_offset = store.max_offset(queue_topic, queue_id)
    popped = sources.offsets.query(group, queue_topic, queue_id)
    if popped < 0:
        popped = max_offset
    inflight = len(unacked) if unacked else 0
    ready = max(0, max_offset - popped)
    figures = _Queue(lag=ready + inflight, inflight=inflight, ready=ready)
    oldest = min(unacked) if unacked else popped
    if figures.lag:
        figures.oldest_unconsumed_ms = _store_time(store, queue_topic, queue_id, oldest)
    if ready:
        figures.oldest_ready_ms = _store_time(store, queue_topic, queue_id, popped)
    return figures


def _age(now_ms: int, store_times: Iterable[int]) -> int:
    """How old the oldest of `store_times` (0s left out) is at `now_ms`; 0 for none."""
    oldest = min((t for t in store_times if t > 0), default=0)
    return max(0, now_ms - oldest) if oldest else 0


def _row(group: str, topic: str, is_retry: bool, now_ms: int, queues: list[_Queue]) -> GroupLag:
    """Sum the queues; the latencies are of the oldest message over all of them."""
    return GroupLag(
        group=group,
        topic=topic,
        is_retry=is_retry,
        lag=sum(q.lag for q in queues),
        lag_latency_ms=_age(now_ms, (q.oldest_unconsumed_ms for q in queues)),
        inflight=sum(q.inflight for q in queues),
        queueing_latency_ms=_age(now_ms, (q.oldest_ready_ms for q in queues)),
        ready=sum(q.ready for q in queues),
    )
