"""Receipt renewal for auto_renew receives: the pure step rule (properties) and the
bookkeeping over a fake change_invisible (pure logic, no broker)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.pop.receipts import ReceiptHandle, parse_receipt_handle
from tidemq.broker.requests import BrokerError
from tidemq.common.clock import ManualClock
from tidemq.grpc.renewal import (
    CLEAR_INVISIBLE_MS,
    MAX_RENEW_FAILURES,
    RENEW_DURATIONS_MS,
    HeldMessage,
    ReceiptRenewals,
    RenewalSettings,
    Step,
    give_back_delay_ms,
    next_step,
)
from tidemq.protocol.codes import ResponseCode

START_MS = 1_700_000_000_000
SETTINGS = RenewalSettings(default_invisible_ms=60_000, ahead_ms=10_000, max_ms=3 * 3_600_000)


def handle(pop_ms: int, invisible_ms: int, offset: int = 7) -> str:
    return ReceiptHandle(offset, pop_ms, invisible_ms, 0, 0, "broker-a", 0, offset).text()


@given(
    due_in=st.integers(-100_000, 200_000),
    held_for=st.integers(0, 4 * 3_600_000),
    renewals=st.integers(0, 20),
    failures=st.integers(0, 5),
)
def test_the_step_rule(due_in: int, held_for: int, renewals: int, failures: int) -> None:
    now = START_MS + held_for
    held = HeldMessage(
        "G", "T", "h0", handle(now + due_in - 60_000, 60_000), START_MS, 1, renewals, failures
    )
    step, invisible = next_step(held, now, SETTINGS)
    if failures >= MAX_RENEW_FAILURES:
        assert step is Step.DROP
    elif due_in > SETTINGS.ahead_ms:
        assert step is Step.WAIT
    elif held_for >= SETTINGS.max_ms:
        assert step is Step.GIVE_BACK
    else:
        assert step is Step.RENEW
        assert invisible == RENEW_DURATIONS_MS[min(renewals, len(RENEW_DURATIONS_MS) - 1)]
        assert invisible >= 60_000  # a renewal never shortens what the client was promised


def test_give_back_delays_follow_the_customized_retry_policy() -> None:
    # attempt 1 = reconsumeTimes 0 -> index 2 of 1s 5s 10s 30s 1m ... 2h
    assert [give_back_delay_ms(a) for a in (1, 2, 3)] == [10_000, 30_000, 60_000]
    assert give_back_delay_ms(100) == 7_200_000


class FakePop:
    """change_invisible as the pop engine answers it: a new handle, or an error."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, int]] = []
        self.fail_with: BrokerError | None = None
        self.gate: asyncio.Event | None = None

    async def change_invisible(self, group: str, topic: str, current: str, ms: int) -> str:
        self.calls.append((current, ms))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return handle(self.clock.now_ms(), ms, offset=len(self.calls) + 100)


def renewals(clock: ManualClock, pop: FakePop, online: set[str]) -> ReceiptRenewals:
    return ReceiptRenewals(SETTINGS, clock, pop.change_invisible, lambda c: c in online)


async def test_a_held_message_is_renewed_and_settled_with_its_current_handle() -> None:
    clock = ManualClock(START_MS)
    pop = FakePop(clock)
    book = renewals(clock, pop, {"c1"})
    given_handle = handle(START_MS, 60_000)
    book.hold("c1", "G", "T", "m1", given_handle, 1)
    await book.scan()
    assert pop.calls == []  # 60 s left: nothing to do
    clock.advance(51)  # 9 s left
    await book.scan()
    assert pop.calls == [(given_handle, RENEW_DURATIONS_MS[0])]
    clock.advance(55)
    await book.scan()
    assert pop.calls[-1][1] == RENEW_DURATIONS_MS[1]
    current = await book.take("c1", "G", "m1", given_handle)
    assert current not in (given_handle, pop.calls[-1][0])  # the second renewal's handle
    assert len(book) == 0
    assert await book.take("c1", "G", "m1", given_handle) == given_handle  # not held any more
    assert book.renewed == 2
    await book.close()


async def test_a_settle_during_a_renewal_waits_for_its_handle() -> None:
    clock = ManualClock(START_MS)
    pop = FakePop(clock)
    pop.gate = asyncio.Event()
    book = renewals(clock, pop, {"c1"})
    given_handle = handle(START_MS, 60_000)
    book.hold("c1", "G", "T", "m1", given_handle, 1)
    clock.advance(55)
    scan = asyncio.create_task(book.scan())
    await asyncio.sleep(0)
    take = asyncio.create_task(book.take("c1", "G", "m1", given_handle))
    await asyncio.sleep(0)
    assert not take.done()
    pop.gate.set()
    await scan
    current = await take
    assert parse_receipt_handle(current).start_offset == 101  # the renewal's new handle
    await book.close()


async def test_failures_gone_handles_and_the_three_hour_limit() -> None:
    clock = ManualClock(START_MS)
    pop = FakePop(clock)
    book = renewals(clock, pop, {"c1"})
    book.hold("c1", "G", "T", "m1", handle(START_MS, 60_000), 1)
    book.hold("c1", "G", "T", "m2", handle(START_MS, 60_000, offset=8), 2)
    clock.advance(55)
    pop.fail_with = BrokerError(ResponseCode.SYSTEM_ERROR, "the store is busy")
    for _ in range(MAX_RENEW_FAILURES):
        await book.scan()
    assert len(book) == 2
    await book.scan()  # a third failure in a row: given up
    assert len(book) == 0

    book.hold("c1", "G", "T", "m3", handle(clock.now_ms(), 60_000, offset=9), 1)
    pop.fail_with = ReceiptHandleError("receipt handle is unknown")
    clock.advance(55)
    await book.scan()
    assert len(book) == 0  # acked elsewhere: nothing to renew

    pop.fail_with = None
    book.hold("c1", "G", "T", "m4", handle(clock.now_ms(), 60_000, offset=10), 3)
    clock.advance(3 * 3600 + 1)  # held past renewMaxTimeMillis
    await book.scan()
    assert pop.calls[-1][1] == give_back_delay_ms(3)
    assert book.given_back == 1 and len(book) == 0
    await book.close()


async def test_a_gone_clients_messages_come_back_soon() -> None:
    clock = ManualClock(START_MS)
    pop = FakePop(clock)
    online = {"c1", "c2"}
    book = renewals(clock, pop, online)
    book.hold("c1", "G", "T", "m1", handle(START_MS, 60_000), 1)
    book.hold("c2", "G", "T", "m2", handle(START_MS, 60_000, offset=8), 1)
    online.discard("c1")
    await book.scan()
    assert [ms for _, ms in pop.calls] == [CLEAR_INVISIBLE_MS]
    assert book.cleared == 1 and len(book) == 1
    await book.close()  # the server stops: the rest comes back too
    assert book.cleared == 2 and len(book) == 0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="period_ms"):
        RenewalSettings(period_ms=0)
