"""A controller-mode master's SyncStateSet: every member acknowledges; the set changes by rule."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from tidemq.ha.sync_state import SlaveProgress, SyncStateWaits, next_sync_state_set
from tidemq.store.api import PutStatus


async def test_a_write_waits_for_every_member() -> None:
    waits = SyncStateWaits(1, timeout_s=5)
    assert waits.wait_replicated(100) is PutStatus.PUT_OK  # alone: answered at once
    waits.report(2, 50, 50, 0.0)
    waits.report(3, 50, 50, 0.0)
    waits.use_members(frozenset({1, 2, 3}), 2)
    pending = waits.wait_replicated(200)
    assert isinstance(pending, asyncio.Future)
    waits.report(2, 200, 200, 1.0)
    assert not pending.done()  # 3 has not got it yet
    waits.report(3, 200, 200, 1.0)
    assert pending.result() is PutStatus.PUT_OK
    # a member joining behind the mark makes later writes wait for it
    waits.use_members(frozenset({1, 2}), 3)
    waits.report(4, 10, 300, 2.0)
    waits.use_members(frozenset({1, 2, 4}), 4)
    later = waits.wait_replicated(250)
    assert isinstance(later, asyncio.Future) and not later.done()
    # shrinking to the master alone answers what waits
    waits.use_members(frozenset({1}), 5)
    assert later.result() is PutStatus.PUT_OK
    waits.close()


async def test_an_unacknowledged_write_times_out() -> None:
    waits = SyncStateWaits(1, timeout_s=0.05)
    waits.use_members(frozenset({1, 2}), 2)
    pending = waits.wait_replicated(10)
    assert isinstance(pending, asyncio.Future)
    async with asyncio.timeout(5):
        assert await pending is PutStatus.FLUSH_SLAVE_TIMEOUT
    waits.close()


PROGRESS = st.builds(SlaveProgress, acked=st.integers(-1, 200), caught_up_at=st.floats(0, 100))


@given(
    members=st.frozensets(st.integers(2, 5)),
    slaves=st.dictionaries(st.integers(2, 6), PROGRESS, max_size=5),
    end=st.integers(0, 200),
    now=st.floats(0, 100),
    limit=st.floats(1, 50),
)
def test_the_proposal_keeps_the_master_and_only_live_caught_up_slaves(
    members: frozenset[int],
    slaves: dict[int, SlaveProgress],
    end: int,
    now: float,
    limit: float,
) -> None:
    current = members | {1}
    proposal = next_sync_state_set(current, 1, slaves, end, now, limit)
    result = current if proposal is None else proposal
    assert 1 in result
    for replica in result - {1}:
        assert replica in slaves  # never a disconnected one
        progress = slaves[replica]
        stayed = replica in current and now - progress.caught_up_at <= limit
        joined = progress.acked >= end
        assert stayed or joined
    for replica, progress in slaves.items():
        if replica in current and now - progress.caught_up_at <= limit:
            assert replica in result  # a live, recent member is never dropped
