"""Retry and backoff policies as pure functions, with RocketMQ's defaults.

Pull loop (Java ``DefaultMQPushConsumerImpl``):

* :data:`PULL_DELAY_ON_EXCEPTION_MS` 3 s: a pull failed, or an orderly queue
  is not locked yet;
* :data:`PULL_DELAY_ON_FLOW_CONTROL_MS` 50 ms: the ProcessQueue is over a limit;
* :data:`PULL_DELAY_ON_SUSPEND_MS` 1 s: the consumer is paused.

Consumption (Java ``ConsumeMessageConcurrentlyService`` / ``...OrderlyService``):

* :func:`consumer_retry_delay_ms`: the broker re-delivers a sent-back message
  at delay level 3 + reconsume times (10 s, 30 s, 1 m, 2 m ... 1 h, 2 h), and
  to the DLQ after max reconsume times (16);
* :data:`LOCAL_RETRY_AFTER_SEND_BACK_FAILURE_MS` 5 s;
* :func:`orderly_suspend_ms`: SUSPEND_CURRENT_QUEUE_A_MOMENT, 1 s by default,
  clamped to 10 ms .. 30 s;
* :data:`ORDERLY_MAX_CONSUME_CONTINUOUSLY_MS` 60 s, then the task yields.

Connections: :func:`reconnect_delay_ms`, exponential with a cap and full
jitter (tidemq's own policy; Java's remoting client simply retries).
"""

from __future__ import annotations

import random

PULL_DELAY_ON_EXCEPTION_MS = 3000
PULL_DELAY_ON_FLOW_CONTROL_MS = 50
PULL_DELAY_ON_SUSPEND_MS = 1000
LOCAL_RETRY_AFTER_SEND_BACK_FAILURE_MS = 5000
ORDERLY_MAX_CONSUME_CONTINUOUSLY_MS = 60_000

DEFAULT_DELAY_LEVELS_MS: tuple[int, ...] = tuple(
    seconds * 1000
    for seconds in (
        1,
        5,
        10,
        30,
        60,
        120,
        180,
        240,
        300,
        360,
        420,
        480,
        540,
        600,
        1200,
        1800,
        3600,
        7200,
    )
)
"""``messageDelayLevel = 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h``;
level n is index n - 1."""

RETRY_BASE_DELAY_LEVEL = 3
DEFAULT_MAX_RECONSUME_TIMES = 16

ORDERLY_SUSPEND_DEFAULT_MS = 1000
ORDERLY_SUSPEND_MIN_MS = 10
ORDERLY_SUSPEND_MAX_MS = 30_000

RECONNECT_BASE_MS = 200
RECONNECT_CAP_MS = 30_000


def effective_max_reconsume_times(configured: int = -1, *, orderly: bool = False) -> int:
    """Java's ``maxReconsumeTimes``: -1 means 16 for concurrent consumption and
    unlimited (2**31 - 1) for orderly consumption."""
    if configured != -1:
        return configured
    return 2**31 - 1 if orderly else DEFAULT_MAX_RECONSUME_TIMES


def retry_delay_level(
    reconsume_times: int, levels: int = len(DEFAULT_DELAY_LEVELS_MS), requested_level: int = 0
) -> int:
    """The delay level the broker gives a sent-back message: the requested one
    if > 0, else 3 + reconsume times; capped at the highest level."""
    if reconsume_times < 0:
        raise ValueError("reconsume_times cannot be negative")
    level = requested_level if requested_level > 0 else RETRY_BASE_DELAY_LEVEL + reconsume_times
    return min(level, levels)


def consumer_retry_delay_ms(
    reconsume_times: int,
    max_reconsume_times: int = DEFAULT_MAX_RECONSUME_TIMES,
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS,
) -> int | None:
    """How long until a message that failed with ``reconsume_times`` comes back,
    or None when it goes to the dead-letter queue instead
    (``reconsume_times >= max_reconsume_times``)."""
    if reconsume_times >= max_reconsume_times:
        return None
    return delay_levels_ms[retry_delay_level(reconsume_times, len(delay_levels_ms)) - 1]


def orderly_suspend_ms(requested_ms: int = -1, default_ms: int = ORDERLY_SUSPEND_DEFAULT_MS) -> int:
    """The pause before an orderly queue retries a failed batch locally: the
    listener's request (-1 = the consumer default), clamped to 10 ms .. 30 s."""
    delay = default_ms if requested_ms == -1 else requested_ms
    return max(ORDERLY_SUSPEND_MIN_MS, min(delay, ORDERLY_SUSPEND_MAX_MS))


def backoff_ceiling_ms(
    attempt: int, base_ms: int = RECONNECT_BASE_MS, cap_ms: int = RECONNECT_CAP_MS
) -> int:
    """min(cap, base * 2**attempt); attempt 0 is the first retry."""
    if attempt < 0:
        raise ValueError("attempt cannot be negative")
    if base_ms <= 0:
        return 0
    if attempt >= cap_ms.bit_length() + 1:  # base * 2**attempt > cap for sure
        return cap_ms
    return min(cap_ms, base_ms << attempt)


def reconnect_delay_ms(
    attempt: int,
    rng: random.Random,
    base_ms: int = RECONNECT_BASE_MS,
    cap_ms: int = RECONNECT_CAP_MS,
) -> float:
    """Full jitter: uniform in [0, :func:`backoff_ceiling_ms`]. Pass a seeded
    :class:`random.Random` for replayable runs."""
    return rng.uniform(0, backoff_ceiling_ms(attempt, base_ms, cap_ms))
