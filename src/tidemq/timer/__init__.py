"""Timer messages at any delivery time (issue #5): parking, the timer store
(timer log, timer files, checkpoint) and the delivery service.

Design: seed 003's timing wheel over time-bucketed files, after RocketMQ 5's
TimerMessageStore; the module docstrings say what each piece guarantees.
"""

from tidemq.timer.parking import (
    TIMER_PROPERTIES,
    TIMER_SOURCE_OFFSET,
    TIMER_TOPIC,
    TimerPropertyError,
    delete_key,
    park,
    recall_marker,
    requested_deliver_ms,
)
from tidemq.timer.service import RecallOutcome, TimerService, TimerSettings

__all__ = [
    "TIMER_PROPERTIES",
    "TIMER_SOURCE_OFFSET",
    "TIMER_TOPIC",
    "RecallOutcome",
    "TimerPropertyError",
    "TimerService",
    "TimerSettings",
    "delete_key",
    "park",
    "recall_marker",
    "requested_deliver_ms",
]
