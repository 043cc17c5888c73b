"""Delivery times for timer messages, as the producer API takes them.

`deliver_at` is an absolute time (an aware datetime, or epoch milliseconds):
it becomes RocketMQ 5's TIMER_DELIVER_MS. `deliver_after` is a delay (a
timedelta, or seconds): it becomes TIMER_DELAY_MS, measured from when the
broker receives the message, so a client clock that is off does not move it.
A naive datetime is refused: it names no instant.
"""

from __future__ import annotations

import datetime as dt

from tidemq.common import properties as props

DeliverAt = dt.datetime | int
DeliverAfter = dt.timedelta | float | int


def timer_properties(
    deliver_at: DeliverAt | None, deliver_after: DeliverAfter | None
) -> dict[str, str]:
    """The timer property a message gets; ValueError for a bad value or both given."""
    if deliver_at is not None and deliver_after is not None:
        raise ValueError("give deliver_at or deliver_after, not both")
    if deliver_at is not None:
        return {props.TIMER_DELIVER_MS: str(_epoch_ms(deliver_at))}
    if deliver_after is not None:
        return {props.TIMER_DELAY_MS: str(_delay_ms(deliver_after))}
    return {}


def _epoch_ms(value: DeliverAt) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                "deliver_at must be an aware datetime (e.g. datetime.now(timezone.utc) + ...);"
                " a naive one names no instant"
            )
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"deliver_at must be a datetime or epoch milliseconds, got {value!r}")
    if value < 0:
        raise ValueError(f"deliver_at must not be negative, got {value}")
    return value


def _delay_ms(value: DeliverAfter) -> int:
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValueError(f"deliver_after must be a timedelta or seconds, got {value!r}")
    if not seconds >= 0:  # also refuses NaN
        raise ValueError(f"deliver_after must not be negative, got {value!r}")
    return round(seconds * 1000)
