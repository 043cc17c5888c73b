"""A controller-mode master's SyncStateSet: who must have a write before it is answered.

RocketMQ 5's master (apache/rocketmq, store/.../ha/autoswitch/
AutoSwitchHAService) keeps the SyncStateSet the controller agreed to: the
replicas that have every acknowledged message, so that any of them may be
elected. With allAckInSyncStateSet a write is answered once *every* member
has it (`SyncStateWaits`); a master alone in its set answers at once.

The master changes its set only through the controller
(CONTROLLER_ALTER_SYNC_STATE_SET), never on its own: `next_sync_state_set`
proposes, the controller agrees, and only then the waits use the new set.
It proposes (AutoSwitchHAService.maybeShrinkSyncStateSet /
maybeExpandInSyncStateSet):

* to drop a member that is not connected, or has not caught up with the
  master's end for `max_not_catchup_s` (haMaxTimeSlaveNotCatchup, 15 s);
* to add a connected slave that has caught up (its report reached the
  master's end as it was at the last check).

So a master cut off from its in-sync slaves answers no write until the
controller lets it shrink the set; cut off from the controller as well, it
answers none (FLUSH_SLAVE_TIMEOUT: stored, not acknowledged), while the
controller may elect one of those slaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidemq.ha.waits import ReplicaWaits
from tidemq.store.api import PutStatus

__all__ = ["SlaveProgress", "SyncStateWaits", "next_sync_state_set"]


@dataclass(slots=True)
class SlaveProgress:
    acked: int = -1
    """Its latest report."""
    caught_up_at: float = 0.0
    """When a report last reached the master's end (monotonic seconds)."""


def next_sync_state_set(
    members: frozenset[int],
    own_id: int,
    slaves: Mapping[int, SlaveProgress],
    caught_up_end: int,
    now: float,
    max_not_catchup_s: float,
) -> frozenset[int] | None:
    """The set to propose to the controller, or None to keep `members`."""
    keep = {own_id}
    for member in members - {own_id}:
        progress = slaves.get(member)
        if progress is not None and now - progress.caught_up_at <= max_not_catchup_s:
            keep.add(member)
    for replica, progress in slaves.items():
        if (
            replica not in keep
            and progress.acked >= caught_up_end
            and (replica in members or now - progress.caught_up_at <= max_not_catchup_s)
        ):
            keep.add(replica)
    proposal = frozenset(keep)
    return None if proposal == members else proposal


class SyncStateWaits(ReplicaWaits):
    """The store's ReplicaGate for a controller-mode master: every member
    of the SyncStateSet but the master itself must report a write's end."""

    def __init__(self, own_id: int, *, timeout_s: float) -> None:
        super().__init__(timeout_s=timeout_s, max_gap=1 << 62)
        self.own_id = own_id
        self.members: frozenset[int] = frozenset({own_id})
        self.members_epoch = 0
        self.slaves: dict[int, SlaveProgress] = {}
        self.on_caught_up: Callable[[int], None] | None = None
        """Told when a slave outside the set catches up: RocketMQ asks to add it
        at once (maybeExpandInSyncStateSet on the slave's ack), not at the next check."""

    def wait_replicated(self, end: int) -> PutStatus | asyncio.Future[PutStatus]:
        if self.members <= {self.own_id}:
            return PutStatus.PUT_OK
        return self._wait(end)

    def report(self, replica_id: int, offset: int, master_end: int, now: float) -> None:
        """Replica `replica_id` reported `offset` while the master ended at `master_end`."""
        progress = self.slaves.setdefault(replica_id, SlaveProgress())
        progress.acked = offset
        if offset >= master_end:
            progress.caught_up_at = now
            if replica_id not in self.members and self.on_caught_up is not None:
                self.on_caught_up(replica_id)
        self._recompute()

    def disconnected(self, replica_id: int) -> None:
        self.slaves.pop(replica_id, None)

    def use_members(self, members: frozenset[int], epoch: int) -> None:
        """The controller agreed to `members` (at SyncStateSet epoch `epoch`)."""
        self.members = members | {self.own_id}
        self.members_epoch = epoch
        self._recompute()

    def _recompute(self) -> None:
        """What every other member has: the writes it covers are answered.
        A master alone answers every waiting write; a new member lowers the
        mark (later writes wait for it too)."""
        book = self._book
        others = self.members - {self.own_id}
        if not others:
            for future in book.drain():
                if not future.done():
                    future.set_result(PutStatus.PUT_OK)
            return
        acked = min((self.slaves[i].acked if i in self.slaves else -1) for i in others)
        if acked < book.acked:
            book.acked = max(acked, 0)
        elif acked > book.acked:
            self.acknowledge(acked)
