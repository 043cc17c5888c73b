"""Producer-side delivery times: deliver_at -> TIMER_DELIVER_MS, deliver_after ->
TIMER_DELAY_MS; bad values and combinations refused before any I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tidemq.client.producer import make_message
from tidemq.client.timing import timer_properties


def test_absolute_and_relative_times() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert timer_properties(at, None) == {"TIMER_DELIVER_MS": str(int(at.timestamp() * 1000))}
    assert timer_properties(1_900_000_000_123, None) == {"TIMER_DELIVER_MS": "1900000000123"}
    assert timer_properties(None, timedelta(minutes=2)) == {"TIMER_DELAY_MS": "120000"}
    assert timer_properties(None, 1.25) == {"TIMER_DELAY_MS": "1250"}
    assert timer_properties(None, None) == {}
    other_zone = datetime(2030, 1, 2, 4, 4, 5, 678000, tzinfo=timezone(timedelta(hours=1)))
    assert timer_properties(other_zone, None) == timer_properties(at, None)


@pytest.mark.parametrize(
    "deliver_at, deliver_after, problem",
    [
        (datetime(2030, 1, 1), None, "aware datetime"),
        (-1, None, "negative"),
        (True, None, "datetime or epoch"),
        ("tomorrow", None, "datetime or epoch"),
        (None, -0.5, "negative"),
        (None, float("nan"), "negative"),
        (None, "soon", "timedelta or seconds"),
        (1, 1.0, "not both"),
    ],
)
def test_bad_values_are_refused(deliver_at: object, deliver_after: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        timer_properties(deliver_at, deliver_after)  # type: ignore[arg-type]


def test_make_message_sets_the_property_and_refuses_a_delay_level_too() -> None:
    message = make_message("T", "x", deliver_after=timedelta(seconds=3))
    assert message.properties["TIMER_DELAY_MS"] == "3000"
    with pytest.raises(ValueError, match="not both"):
        make_message("T", "x", delay_level=2, deliver_after=3)
