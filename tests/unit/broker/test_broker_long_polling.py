from __future__ import annotations

import asyncio
import time

from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.long_polling import (
    LongPollingService,
    Wake,
    hold_time_s,
    recheck_interval_s,
)
from tidemq.common.clock import ManualClock
from tidemq.common.hashing import tag_code
from tidemq.testing.waiting import HANG_GUARD_S


async def test_an_arrival_at_or_past_the_offset_wakes_the_pull() -> None:
    service = LongPollingService(clock=ManualClock())
    held = service.hold("T", 0, 5, 10.0)
    assert held is not None
    assert service.held_count == 1
    assert service.notify_arrival("T", 1, 9, 0) == 0  # another queue
    assert service.notify_arrival("T", 0, 4, 0) == 0  # before the offset
    assert service.notify_arrival("T", 0, 5, 0) == 1
    assert await service.wait(held) is Wake.ARRIVED
    assert service.held_count == 0


async def test_the_tag_filter_decides_which_arrivals_wake() -> None:
    service = LongPollingService(clock=ManualClock())
    wanted = tag_code("TagA")
    held = service.hold("T", 0, 0, 10.0, lambda code: code == wanted)
    assert held is not None
    assert service.notify_arrival("T", 0, 0, tag_code("TagB")) == 0
    assert not held.future.done()
    assert service.notify_arrival("T", 0, 1, wanted) == 1
    assert await service.wait(held) is Wake.ARRIVED


async def test_recheck_wakes_pulls_whose_queue_grew_whatever_the_filter() -> None:
    service = LongPollingService(clock=ManualClock())
    held = service.hold("T", 0, 3, 10.0, lambda code: False)
    other = service.hold("T", 1, 3, 10.0)
    assert held is not None and other is not None
    max_offsets = {("T", 0): 4, ("T", 1): 3}
    assert service.recheck(lambda t, q: max_offsets[(t, q)]) == 1
    assert await service.wait(held) is Wake.RECHECK
    assert not other.future.done()
    assert service.held_for("T", 1) == 1


async def test_a_pull_is_answered_at_its_timeout() -> None:
    service = LongPollingService()
    held = service.hold("T", 0, 0, 0.2)
    assert held is not None
    started = time.monotonic()
    async with asyncio.timeout(HANG_GUARD_S):  # a hang guard, not a speed claim
        assert await service.wait(held) is Wake.TIMEOUT
    assert time.monotonic() - started >= 0.15  # held, not answered at once
    assert service.held_count == 0


async def test_expire_uses_the_injected_clock() -> None:
    clock = ManualClock()
    service = LongPollingService(clock=clock)
    held = service.hold("T", 0, 0, 15.0)
    assert held is not None
    clock.advance(14)
    assert service.expire() == 0
    clock.advance(1)
    assert service.expire() == 1
    assert await service.wait(held) is Wake.TIMEOUT


async def test_holds_are_bounded_and_capped() -> None:
    service = LongPollingService(clock=ManualClock(), max_held=2, max_suspend_s=1.0)
    first = service.hold("T", 0, 0, 100.0)
    assert first is not None and first.timeout_s == 1.0
    assert service.hold("T", 0, 0, 1.0) is not None
    assert service.hold("T", 0, 0, 1.0) is None
    assert service.wake_all() == 2
    assert service.hold("T", 0, 0, 1.0) is None  # closed


async def test_a_cancelled_waiter_is_unparked() -> None:
    service = LongPollingService(clock=ManualClock())
    held = service.hold("T", 0, 0, 10.0)
    assert held is not None
    task = asyncio.create_task(service.wait(held))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert service.held_count == 0


# -- long polling switched off (BrokerConfig.long_polling_enable) ------------------------


@given(
    suspend_flag=st.booleans(),
    client_suspend_ms=st.integers(-1, 120_000),
    short_polling_time_ms=st.integers(1, 10_000),
)
def test_without_long_polling_a_suspended_pull_is_held_the_short_polling_time(
    suspend_flag: bool, client_suspend_ms: int, short_polling_time_ms: int
) -> None:
    hold = hold_time_s(
        suspend_flag=suspend_flag,
        client_suspend_ms=client_suspend_ms,
        long_polling_enable=False,
        short_polling_time_ms=short_polling_time_ms,
    )
    # Java: only the SUSPEND flag counts; the client's time is replaced
    assert hold == (short_polling_time_ms / 1000 if suspend_flag else None)


@given(
    suspend_flag=st.booleans(),
    client_suspend_ms=st.integers(-1, 120_000),
    short_polling_time_ms=st.integers(1, 10_000),
)
def test_with_long_polling_a_suspended_pull_is_held_the_clients_time(
    suspend_flag: bool, client_suspend_ms: int, short_polling_time_ms: int
) -> None:
    hold = hold_time_s(
        suspend_flag=suspend_flag,
        client_suspend_ms=client_suspend_ms,
        long_polling_enable=True,
        short_polling_time_ms=short_polling_time_ms,
    )
    held = suspend_flag and client_suspend_ms > 0
    assert hold == (client_suspend_ms / 1000 if held else None)


def test_without_long_polling_the_recheck_runs_every_short_polling_time() -> None:
    def interval(enabled: bool) -> float:
        return recheck_interval_s(
            long_polling_enable=enabled,
            long_polling_check_interval_s=5.0,
            short_polling_time_ms=250,
        )

    assert interval(True) == 5.0
    assert interval(False) == 0.25


async def test_without_long_polling_arrivals_wake_nobody_but_the_recheck_does() -> None:
    service = LongPollingService(clock=ManualClock(), wake_on_arrival=False)
    held = service.hold("T", 0, 5, 1.0)
    assert held is not None
    assert service.notify_arrival("T", 0, 5, 0) == 0
    assert not held.future.done()
    assert service.recheck(lambda topic, queue_id: 6) == 1
    assert await service.wait(held) is Wake.RECHECK
