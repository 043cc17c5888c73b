"""One timer for a connection's request deadlines (tidemq.transport.deadlines),
driven by a fake loop clock: which requests expire, when, and that a discarded
one never does."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.transport.deadlines import TOLERANCE_S, Deadlines


class _Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeLoop:
    """time() and call_at() only: timers run when `advance` passes them."""

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, _Handle, Callable[[], None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._timers, (when, next(self._order), handle, callback))
        return handle

    @property
    def armed(self) -> int:
        return sum(not handle.cancelled for _, _, handle, _ in self._timers)

    def advance(self, to: float) -> None:
        while self._timers and self._timers[0][0] <= to:
            when, _, handle, callback = heapq.heappop(self._timers)
            self.now = max(self.now, when)
            if not handle.cancelled:
                callback()
        self.now = to


def make(loop: FakeLoop) -> tuple[Deadlines, list[tuple[int, float]]]:
    expired: list[tuple[int, float]] = []
    return Deadlines(loop, lambda opaque: expired.append((opaque, loop.now))), expired  # type: ignore[arg-type]


def test_due_requests_expire_on_time_and_the_timer_moves_to_the_next() -> None:
    loop = FakeLoop()
    deadlines, expired = make(loop)
    deadlines.add(1, 3.0)
    deadlines.add(2, 5.0)
    loop.advance(2.9)
    assert expired == []
    loop.advance(3.0)
    assert expired == [(1, 3.0)]
    loop.advance(5.0)
    assert expired == [(1, 3.0), (2, 5.0)]
    assert len(deadlines) == 0 and loop.armed == 0


def test_a_shorter_deadline_added_later_fires_first() -> None:
    loop = FakeLoop()
    deadlines, expired = make(loop)
    deadlines.add(1, 10.0)
    deadlines.add(2, 1.0)
    loop.advance(1.0)
    assert expired == [(2, 1.0)]
    assert loop.armed == 1  # re-armed for request 1


def test_answered_requests_never_expire_and_close_stops_the_timer() -> None:
    loop = FakeLoop()
    deadlines, expired = make(loop)
    deadlines.add(1, 1.0)
    deadlines.discard(1)
    deadlines.add(2, 2.0)
    deadlines.close()
    loop.advance(100.0)
    assert expired == []
    assert loop.armed == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "discard", "advance"]),
            st.integers(min_value=0, max_value=20),
            st.floats(min_value=0.0, max_value=5.0),
        ),
        max_size=60,
    )
)
def test_every_request_expires_once_when_due_and_only_then(
    steps: list[tuple[str, int, float]],
) -> None:
    loop = FakeLoop()
    deadlines, expired = make(loop)
    live: dict[int, float] = {}
    for action, opaque, amount in steps:
        if action == "add" and opaque not in live:
            live[opaque] = loop.now + amount
            deadlines.add(opaque, loop.now + amount)
        elif action == "discard":
            live.pop(opaque, None)
            deadlines.discard(opaque)
        elif action == "advance":
            before = len(expired)
            loop.advance(loop.now + amount)
            for got, at in expired[before:]:
                assert got in live, "a discarded or unknown request expired"
                assert at >= live.pop(got) - TOLERANCE_S, "expired before its deadline"
            overdue = [o for o, deadline in live.items() if deadline <= loop.now - TOLERANCE_S]
            assert overdue == [], "a request outlived its deadline"
    assert len(deadlines) == len(live)
