"""Broker-side queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

Mirrors RocketMQ 4.x `RebalanceLockManager` (SPEC §3, seed 002):

* A lock is held per consumer group and queue (topic, broker name, queue id)
  by one client id, and lives `expiry_s` (default 60 s) after it was last
  taken or renewed. It is expired when strictly more than `expiry_s` have
  passed (Java: `now - lastUpdate > maxLiveTime`).
* `lock_batch` locks every queue that is free, already held by the caller
  (renewal), or held by another client whose lock expired (take-over); it
  answers the queues the caller now holds. Orderly consumers renew every 20 s.
* `unlock_batch` releases only the caller's own locks; another client's
  lock is left alone (Java logs a warning).
* A closed connection frees nothing: its consumer may still be consuming
  (a network blip), and a successor that locked the queue at once would
  consume it in parallel. As in Java, a lock ends by expiry or unlock only;
  a consumer that shuts down cleanly unlocks its queues itself.

Time is the injected clock's monotonic seconds. Not thread-safe: the broker
calls it from its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from tidemq.common.clock import Clock

log = logging.getLogger(__name__)

QueueKey = tuple[str, str, int]
"""(topic, broker name, queue id): Java's MessageQueue."""

DEFAULT_LOCK_EXPIRY_S = 60.0
"""Java's `rocketmq.broker.rebalance.lockMaxLiveTime` default (60 000 ms)."""


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update: float


class QueueLockManager:
    def __init__(self, clock: Clock, expiry_s: float = DEFAULT_LOCK_EXPIRY_S) -> None:
        if expiry_s <= 0:
            raise ValueError("a lock expiry must be positive")
        self._clock = clock
        self._expiry_s = expiry_s
        self._groups: dict[str, dict[QueueKey, _LockEntry]] = {}

    @property
    def expiry_s(self) -> float:
        return self._expiry_s

    def _expired(self, entry: _LockEntry, now: float) -> bool:
        return now - entry.last_update > self._expiry_s

    def lock_batch(self, group: str, queues: set[QueueKey], client_id: str) -> set[QueueKey]:
        """Lock (or renew) each queue for `client_id` unless another live client
        holds it; the queues `client_id` holds afterwards (a subset of `queues`)."""
        now = self._clock.monotonic()
        table = self._groups.setdefault(group, {})
        locked: set[QueueKey] = set()
        for queue in queues:
            entry = table.get(queue)
            if entry is None:
                table[queue] = _LockEntry(client_id, now)
            elif entry.client_id == client_id:
                entry.last_update = now
            elif self._expired(entry, now):
                log.warning(
                    "group %s: lock of %s taken over by %s, expired lock of %s",
                    group,
                    queue,
                    client_id,
                    entry.client_id,
                )
                entry.client_id = client_id
                entry.last_update = now
            else:
                log.debug(
                    "group %s: %s not locked by %s, held by %s",
                    group,
                    queue,
                    client_id,
                    entry.client_id,
                )
                continue
            locked.add(queue)
        if not table:
            del self._groups[group]
        return locked

    def unlock_batch(self, group: str, queues: set[QueueKey], client_id: str) -> None:
        """Release the queues `client_id` holds; others' locks are untouched.
        A holder may release its own lock even after it expired."""
        table = self._groups.get(group)
        if table is None:
            return
        for queue in queues:
            entry = table.get(queue)
            if entry is None:
                continue
            if entry.client_id == client_id:
                del table[queue]
            else:
                log.warning(
                    "group %s: %s unlock by %s refused, held by %s",
                    group,
                    queue,
                    client_id,
                    entry.client_id,
                )
        if not table:
            del self._groups[group]

    def is_locked(self, group: str, queue: QueueKey, client_id: str) -> bool:
        """True when `client_id` holds a live lock on `queue`. A pure query:
        unlike Java's private `isLocked` it does not renew the lock."""
        entry = self._groups.get(group, {}).get(queue)
        return (
            entry is not None
            and entry.client_id == client_id
            and not self._expired(entry, self._clock.monotonic())
        )

    def holder(self, group: str, queue: QueueKey) -> str | None:
        """The client holding a live lock on `queue`, if any."""
        entry = self._groups.get(group, {}).get(queue)
        if entry is None or self._expired(entry, self._clock.monotonic()):
            return None
        return entry.client_id

    def locked_queues(self, group: str, client_id: str) -> set[QueueKey]:
        """The queues of `group` on which `client_id` holds a live lock."""
        now = self._clock.monotonic()
        return {
            queue
            for queue, entry in self._groups.get(group, {}).items()
            if entry.client_id == client_id and not self._expired(entry, now)
        }

    def drop_group(self, group: str) -> None:
        """Forget every lock of a group (the group was deleted)."""
        self._groups.pop(group, None)

    def purge_expired(self, groups: Iterable[str] | None = None) -> int:
        """Remove expired entries (memory hygiene; expiry itself needs no purge).
        Returns how many were removed."""
        now = self._clock.monotonic()
        removed = 0
        for group in list(self._groups if groups is None else groups):
            table = self._groups.get(group)
            if table is None:
                continue
            for queue in [q for q, e in table.items() if self._expired(e, now)]:
                del table[queue]
                removed += 1
            if not table:
                del self._groups[group]
        return removed
