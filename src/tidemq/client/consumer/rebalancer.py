"""Which queues this consumer holds (RocketMQ's RebalanceImpl).

One round, per subscribed topic: list the topic's readable queues (from the
route) and, in clustering mode, the group's consumer ids (from a broker);
sort both; let the allocation strategy pick this client's share
(broadcasting: every queue); compare with the queues held
(:func:`~tidemq.client._core.rebalance.diff`):

* a queue no longer allocated (or not pulled for 120 s, when the owner asks
  for that check) is marked dropped and handed to the listener's
  ``on_queue_removed`` (persist the offset, unlock); if that says False
  (orderly: a batch is still being consumed) the queue is kept as it was
  (not dropped) and the next round tries again;
* a newly allocated queue is locked first in orderly clustering mode (no lock,
  no queue this round), its stale in-memory offset forgotten, its start offset
  computed (:meth:`Rebalancer.compute_pull_from_where`), and handed to
  ``on_queue_added`` with a fresh ProcessQueue.

Queues of topics no longer subscribed are dropped too. Rounds never overlap.

A round says whether it left the client *balanced* (Java
``RebalanceImpl.rebalanceByTopic``): for every topic it could compute, the
queues held (not dropped) are exactly the allocated ones. An orderly lock
the broker refused, a start offset that could not be computed or a busy
queue that could not be released leave it unbalanced, and the owner runs
the next round soon instead of after the full interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from tidemq.client._core import rebalance as plan
from tidemq.client._core.allocation import AllocateStrategy
from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer import queue_offsets
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.client.model import TopicRoute
from tidemq.common.message import MessageQueue
from tidemq.common.names import is_retry_topic
from tidemq.protocol import ResponseCode

if TYPE_CHECKING:
    from tidemq.client.consumer.offset_store import OffsetStore
    from tidemq.client.consumer.subscription import SubscriptionSpec

__all__ = ["DO_NOT_START", "RebalanceListener", "Rebalancer"]

log = logging.getLogger(__name__)

DO_NOT_START = -1
"""What :meth:`Rebalancer.compute_pull_from_where` returns when the queue
cannot start now (the store or the broker could not answer)."""


class RebalanceListener(Protocol):
    """What the owner (push or lite pull consumer) does when queues move."""

    async def on_queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Persist offset / unlock; False = cannot drop yet (orderly busy), keep it."""
        ...

    async def on_queue_added(
        self, mq: MessageQueue, pq: ProcessQueue, next_offset: int
    ) -> None: ...

    def on_assignment_changed(
        self, topic: str, all_queues: Sequence[MessageQueue], assigned: Sequence[MessageQueue]
    ) -> None: ...


class Rebalancer:
    """Keeps ``process_queues`` equal to this client's share of every subscribed topic."""

    def __init__(
        self,
        *,
        instance: ClientInstance,
        group: str,
        broadcasting: bool,
        strategy: AllocateStrategy,
        offset_store: OffsetStore,
        consume_from: ConsumeFromWhere,
        consume_timestamp: str,
        listener: RebalanceListener,
        orderly: bool = False,
        lock: Callable[[MessageQueue], Awaitable[bool]] | None = None,
        drop_pull_expired: bool = False,
    ) -> None:
        self.instance = instance
        self.group = group
        self.broadcasting = broadcasting
        self.strategy = strategy
        self.offset_store = offset_store
        self.consume_from = consume_from
        self.consume_timestamp_ms = plan.parse_consume_timestamp(consume_timestamp)
        self.listener = listener
        self.orderly = orderly
        self.lock = lock
        self.drop_pull_expired = drop_pull_expired
        """Push consumers: re-create a queue not pulled for 120 s (Java)."""
        self.subscriptions: dict[str, SubscriptionSpec] = {}
        """Set by the owner: topic -> subscription (the retry topic included)."""
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.topic_queues: dict[str, list[MessageQueue]] = {}
        """Readable queues per subscribed topic, from the routes."""
        self._round = asyncio.Lock()

    # -- inputs ------------------------------------------------------------------

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        if topic in self.subscriptions:
            self.topic_queues[topic] = route.read_queues()

    async def _queues_of(self, topic: str) -> list[MessageQueue]:
        queues = self.topic_queues.get(topic)
        if queues is None:
            route = await self.instance.route(topic)
            queues = self.topic_queues[topic] = route.read_queues()
        return queues

    # -- one round -----------------------------------------------------------------

    async def rebalance(self) -> bool:
        """One round over every subscribed topic; failures are logged per topic.

        True when balanced (see the module docstring). A topic whose round
        failed (no route, no consumer list) counts as balanced, as in Java:
        retrying it every second would not make the broker answer sooner.
        """
        balanced = True
        async with self._round:
            for topic in sorted(self.subscriptions):
                try:
                    if not await self._rebalance_topic(topic):
                        balanced = False
                except ClientError as exc:
                    # A new group's retry topic reaches the name server a moment
                    # after the first heartbeat created it: not worth a warning.
                    quiet = is_retry_topic(topic) and exc.code == ResponseCode.TOPIC_NOT_EXIST
                    log.log(
                        logging.INFO if quiet else logging.WARNING,
                        "%s: rebalance of %s skipped: %s",
                        self.group,
                        topic,
                        exc,
                    )
                except ValueError as exc:
                    log.warning("%s: rebalance of %s skipped: %s", self.group, topic, exc)
            await self._drop_unsubscribed()
        return balanced

    async def _allocated(self, topic: str, queues: list[MessageQueue]) -> list[MessageQueue]:
        if self.broadcasting:
            return list(queues)
        consumer_ids = await self.instance.consumer_ids(self.group, topic)
        if not consumer_ids:
            raise ClientError(
                f"the broker knows no consumer of group {self.group} yet",
                ResponseCode.CONSUMER_NOT_ONLINE,
            )
        return self.strategy.allocate(
            self.group, self.instance.client_id, sorted(queues), sorted(consumer_ids)
        )

    async def _rebalance_topic(self, topic: str) -> bool:
        """One topic's round; True when exactly the allocated queues are held."""
        queues = await self._queues_of(topic)
        if not queues:
            log.warning("%s: topic %s has no readable queue", self.group, topic)
            return True
        allocated = await self._allocated(topic, queues)
        held = {mq: pq for mq, pq in self.process_queues.items() if mq.topic == topic}
        # A queue dropped by its pull loop (OFFSET_ILLEGAL) is left alone: the
        # pull service forgets it once its offset is fixed, then it is re-added.
        expired = [
            mq
            for mq, pq in held.items()
            if self.drop_pull_expired and not pq.dropped and pq.is_pull_expired()
        ]
        change = plan.diff(set(held), set(allocated), expired)
        changed = False
        for mq in change.to_drop:
            if await self._remove(mq, held[mq]):
                changed = True
        for mq in change.to_add:
            if await self._add(mq):
                changed = True
        if changed:
            assigned = sorted(mq for mq in self.process_queues if mq.topic == topic)
            log.info(
                "%s: %s rebalanced: %d of %d queues held",
                self.group,
                topic,
                len(assigned),
                len(queues),
            )
            try:
                self.listener.on_assignment_changed(topic, list(queues), assigned)
            except Exception:
                log.exception("%s: assignment listener failed", self.group)
        working = {
            mq for mq, pq in self.process_queues.items() if mq.topic == topic and not pq.dropped
        }
        return working == set(allocated)

    async def _remove(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        was_dropped = pq.dropped
        pq.dropped = True  # first, so no result of a batch in flight is committed
        try:
            released = await self.listener.on_queue_removed(mq, pq)
        except Exception:
            log.exception("%s: releasing %s failed", self.group, mq)
            released = False
        if not released:
            pq.dropped = was_dropped  # still ours: keep pulling and consuming it
            return False
        if self.process_queues.get(mq) is pq:
            del self.process_queues[mq]
        return True

    async def _add(self, mq: MessageQueue) -> bool:
        if mq in self.process_queues:  # a dropped queue not yet released
            return False
        if self.orderly and self.lock is not None and not await self.lock(mq):
            log.info("%s: %s not locked at the broker: not taken this round", self.group, mq)
            return False
        self.offset_store.remove(mq)
        next_offset = await self.compute_pull_from_where(mq)
        if next_offset < 0:
            log.warning("%s: no start offset for %s: not taken this round", self.group, mq)
            return False
        pq = ProcessQueue(self.instance.clock)
        if self.orderly and self.lock is not None:
            pq.mark_locked()
        self.process_queues[mq] = pq
        await self.listener.on_queue_added(mq, pq, next_offset)
        return True

    async def _drop_unsubscribed(self) -> None:
        for mq, pq in list(self.process_queues.items()):
            if mq.topic not in self.subscriptions:
                await self._remove(mq, pq)

    # -- start offsets ---------------------------------------------------------------

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly held queue starts: the stored offset, else by
        ConsumeFromWhere; :data:`DO_NOT_START` when the store or broker failed."""
        from tidemq.client.consumer.offset_store import ReadOffsetType

        try:
            stored = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
            start = plan.start_offset_plan(
                stored,
                self.consume_from,
                is_retry_topic(mq.topic),
                self.consume_timestamp_ms,
            )
            match start:
                case plan.StartAt(offset=offset):
                    return offset
                case plan.AskMaxOffset():
                    return await queue_offsets.max_offset(self.instance, mq)
                case plan.SearchByTimestamp(timestamp_ms=timestamp_ms):
                    return await queue_offsets.search_offset(self.instance, mq, timestamp_ms)
                case plan.DoNotStart(reason=reason):
                    log.warning("%s: %s does not start: %s", self.group, mq, reason)
                    return DO_NOT_START
        except ClientError as exc:
            log.warning("%s: start offset of %s unknown: %s", self.group, mq, exc)
        return DO_NOT_START

    # -- end -------------------------------------------------------------------------

    async def drop_all(self) -> None:
        """Release every queue (shutdown): each is marked dropped and handed to
        ``on_queue_removed``; queues that cannot be released are forgotten anyway."""
        async with self._round:
            for mq, pq in sorted(self.process_queues.items()):
                await self._remove(mq, pq)
            self.process_queues.clear()
