"""Rebalance decisions, without I/O (SPEC §3 "Rebalance", protocol §6.5).

* :func:`diff`: which queues to drop, add or keep after an allocation round.
* :func:`start_offset_plan`: where a newly assigned queue starts, as RocketMQ's
  ``RebalancePushImpl.computePullFromWhereWithException`` decides it; the
  caller performs the broker call the plan names (GET_MAX_OFFSET,
  SEARCH_OFFSET_BY_TIMESTAMP) and, if that call fails, does not start the
  queue this round (Java likewise skips it until the next rebalance).
* :func:`parse_consume_timestamp` / :func:`default_consume_timestamp`: the
  ``consumeTimestamp`` option (``yyyyMMddHHmmss``, default 30 minutes before
  the consumer was created).
* :func:`next_round_in_s`: when the next round runs (soon after one that
  left the client unbalanced, e.g. with an orderly lock refused).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Collection, Set
from dataclasses import dataclass

from tidemq.common.message import MessageQueue

CONSUME_TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"
DEFAULT_CONSUME_TIMESTAMP_LOOKBACK_MS = 30 * 60 * 1000


# -- when --------------------------------------------------------------------------

UNBALANCED_RETRY_MS = 1000
"""Java's ``RebalanceService`` runs the next round after ``minInterval`` (1 s)
instead of ``waitInterval`` (20 s) when the last one left the client
unbalanced, and ``RebalanceImpl`` asks for one 500 ms after a refused lock."""


def next_round_in_s(balanced: bool, interval_s: float) -> float:
    """Seconds until the next round: the interval, or at most 1 s after a
    round that did not leave exactly the allocated queues held."""
    if balanced:
        return interval_s
    return min(interval_s, UNBALANCED_RETRY_MS / 1000)


# -- diff ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebalanceDiff:
    """The outcome of one allocation round for one topic; lists are sorted."""

    to_drop: list[MessageQueue]
    """Held but no longer allocated (or stale): mark dropped, persist the
    offset, unlock if orderly, forget."""
    to_add: list[MessageQueue]
    """Allocated but not held: compute the start offset, create a PullRequest."""
    unchanged: list[MessageQueue]
    """Held and still allocated."""

    @property
    def changed(self) -> bool:
        return bool(self.to_drop or self.to_add)


def diff(
    current: Set[MessageQueue],
    allocated: Set[MessageQueue],
    pull_expired: Collection[MessageQueue] = (),
) -> RebalanceDiff:
    """Compare the queues held with the queues just allocated.

    ``pull_expired`` names held queues whose ProcessQueue has not been pulled
    for too long (push consumers): Java drops such a queue even when it is
    still allocated, and the next round adds it back with a fresh pull loop.
    Callers pass only queues of one topic, as Java's per-topic round does.
    """
    stale = set(pull_expired)
    kept = current & allocated
    return RebalanceDiff(
        to_drop=sorted((current - allocated) | (kept & stale)),
        to_add=sorted(allocated - current),
        unchanged=sorted(kept - stale),
    )


# -- where consumption starts -----------------------------------------------


class ConsumeFromWhere(enum.Enum):
    """Java's ``ConsumeFromWhere``; only LAST, FIRST and TIMESTAMP differ."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    """Deprecated: behaves as CONSUME_FROM_LAST_OFFSET (RocketMQ 4.9)."""
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    """Deprecated: behaves as CONSUME_FROM_LAST_OFFSET (RocketMQ 4.9)."""
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    """Deprecated: behaves as CONSUME_FROM_LAST_OFFSET (RocketMQ 4.9)."""

    @property
    def effective(self) -> ConsumeFromWhere:
        """The value that decides behaviour (deprecated ones map to LAST)."""
        if self in (
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        ):
            return self
        return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


@dataclass(frozen=True, slots=True)
class StartAt:
    """Start pulling at this offset (a stored offset, or 0)."""

    offset: int


@dataclass(frozen=True, slots=True)
class AskMaxOffset:
    """Ask the broker for the queue's max offset (GET_MAX_OFFSET) and start there."""


@dataclass(frozen=True, slots=True)
class SearchByTimestamp:
    """Ask the broker for the offset at this time (SEARCH_OFFSET_BY_TIMESTAMP)."""

    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class DoNotStart:
    """Do not start the queue now; the next rebalance tries again."""

    reason: str


StartPlan = StartAt | AskMaxOffset | SearchByTimestamp | DoNotStart

NO_STORED_OFFSET = -1
"""What an offset store read yields when nothing is committed (QUERY_NOT_FOUND
included). Java's remote store yields -2 on other errors: "do not start"."""


def start_offset_plan(
    stored_offset: int,
    where: ConsumeFromWhere,
    is_retry_topic: bool,
    consume_timestamp_ms: int | None = None,
) -> StartPlan:
    """Where a newly assigned queue starts, from the offset store's answer.

    ``stored_offset`` >= 0 wins whatever ``where`` says. -1 (nothing stored):
    LAST -> retry topics from 0, others at the broker's max offset; FIRST -> 0;
    TIMESTAMP -> retry topics at the max offset, others by timestamp
    (``consume_timestamp_ms`` is then required). Any other negative value (a
    failed read) -> do not start.
    """
    if stored_offset >= 0:
        return StartAt(stored_offset)
    if stored_offset != NO_STORED_OFFSET:
        return DoNotStart(f"reading the stored offset failed ({stored_offset})")
    match where.effective:
        case ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return StartAt(0)
        case ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            if is_retry_topic:
                return AskMaxOffset()
            if consume_timestamp_ms is None:
                raise ValueError("CONSUME_FROM_TIMESTAMP needs consume_timestamp_ms")
            return SearchByTimestamp(consume_timestamp_ms)
        case _:
            return StartAt(0) if is_retry_topic else AskMaxOffset()


# -- consumeTimestamp ----------------------------------------------------------

_TIMESTAMP_RE = re.compile(r"\d{14}")


def parse_consume_timestamp(text: str, tz: dt.tzinfo | None = None) -> int:
    """``yyyyMMddHHmmss`` -> epoch milliseconds.

    ``tz`` None means the local time zone (Java parses in the JVM's default
    zone). Stricter than Java's lenient SimpleDateFormat: impossible dates
    (month 13, 31 February) raise ValueError.
    """
    if not _TIMESTAMP_RE.fullmatch(text):
        raise ValueError(f"bad consume timestamp {text!r}: expected yyyyMMddHHmmss")
    moment = dt.datetime.strptime(text, CONSUME_TIMESTAMP_FORMAT)
    if tz is not None:
        moment = moment.replace(tzinfo=tz)
    return round(moment.timestamp() * 1000)


def format_consume_timestamp(epoch_ms: int, tz: dt.tzinfo | None = None) -> str:
    """Epoch milliseconds -> ``yyyyMMddHHmmss`` (local time when ``tz`` is None)."""
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=tz)
    return moment.strftime(CONSUME_TIMESTAMP_FORMAT)


def default_consume_timestamp(now_ms: int, tz: dt.tzinfo | None = None) -> str:
    """Java's default ``consumeTimestamp``: 30 minutes before ``now_ms``."""
    return format_consume_timestamp(now_ms - DEFAULT_CONSUME_TIMESTAMP_LOOKBACK_MS, tz)
