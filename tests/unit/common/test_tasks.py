"""TaskSet: owned tasks are cancelled and awaited, even ones that lose a cancel."""

from __future__ import annotations

import asyncio

from tidemq.common.tasks import TaskSet
from tidemq.testing.waiting import HANG_GUARD_S


async def test_cancel_all_ends_every_task() -> None:
    tasks = TaskSet("test")
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    spawned = [tasks.spawn(forever()) for _ in range(3)]
    await started.wait()
    await tasks.cancel_all(timeout=5.0)
    assert len(tasks) == 0
    assert all(task.cancelled() for task in spawned)


async def test_a_swallowed_cancellation_is_repeated_without_waiting_the_whole_timeout() -> None:
    tasks = TaskSet("test")
    cancels = 0
    started = asyncio.Event()

    async def swallows_the_first_cancel() -> None:
        nonlocal cancels
        started.set()
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancels += 1
                if cancels > 1:
                    raise

    tasks.spawn(swallows_the_first_cancel())
    await started.wait()
    # The timeout is an hour: a cancel_all that waited it out trips the hang guard.
    async with asyncio.timeout(HANG_GUARD_S):
        await tasks.cancel_all(timeout=3600.0)
    assert len(tasks) == 0
    assert cancels == 2
