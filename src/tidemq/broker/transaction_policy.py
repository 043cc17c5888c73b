"""The decisions of transactional messages, free of I/O (so they are testable alone).

Java references (rocketmq-all 4.9.7): TransactionalMessageServiceImpl.check
(due? discard?), TransactionalMessageUtil (topics, the op tag, immunity time),
TransactionalMessageBridge (op record body), EndTransactionProcessor
(checkPrepareMessage: the remarks of a mismatching END_TRANSACTION).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from tidemq.broker.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

__all__ = [
    "CHECK_GROUP",
    "HALF_TOPIC",
    "OP_TAG",
    "OP_TOPIC",
    "ResolvedLedger",
    "Verdict",
    "check_times",
    "decide",
    "end_mismatch",
    "immunity_ms",
    "op_body",
    "parse_op_body",
]

HALF_TOPIC = TRANS_HALF_TOPIC
OP_TOPIC = TRANS_OP_HALF_TOPIC
OP_TAG = "d"
"""TransactionalMessageUtil.REMOVETAG: an op record says "this half is resolved"."""
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
"""The consumer group under which the check-back keeps its progress (as Java)."""


def op_body(half_queue_offset: int) -> bytes:
    """An op record's body: the half's queue offset in decimal (4.9.x format)."""
    return str(half_queue_offset).encode()


def parse_op_body(body: bytes) -> list[int]:
    """Half queue offsets named by an op record. 5.x merges several, comma
    separated; unreadable parts are dropped (a bad op must not stop the scan)."""
    offsets: list[int] = []
    for part in body.decode("utf-8", "replace").split(","):
        text = part.strip()
        if text.isdigit():
            offsets.append(int(text))
    return offsets


def check_times(raw: str | None) -> int:
    """TRANSACTION_CHECK_TIMES of a half: how often it was checked back already."""
    if raw is None:
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def immunity_ms(raw_seconds: str | None, timeout_ms: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS as ms; never below the timeout (Java's getImmunityTime)."""
    if raw_seconds is None:
        return timeout_ms
    try:
        value = int(raw_seconds) * 1000
    except ValueError:
        return timeout_ms
    return max(value, timeout_ms)


class Verdict(enum.Enum):
    """What the check-back does with the half at the head of its scan."""

    WAIT = "wait"
    """Too young: stop the scan here (everything behind it is younger)."""
    CHECK = "check"
    """Re-append it with one more check counted, then ask a producer."""
    REQUEUE = "requeue"
    """Past the timeout but inside its own immunity: re-append it unchanged,
    so it does not hold up the halves behind it."""
    DISCARD = "discard"
    """Checked the maximum number of times: drop it (with a log line)."""


def decide(
    now_ms: int,
    *,
    times_checked: int,
    born_ms: int,
    stored_ms: int,
    timeout_ms: int,
    immunity_raw: str | None,
    check_max: int,
) -> Verdict:
    """The verdict on one unresolved half.

    A half never checked is due once it is older than the timeout (or its
    immunity), its age counted from the earlier of born and store time (a
    producer clock ahead of the broker must not postpone the check). A half
    checked before is a copy re-appended by an earlier scan, and the scans run
    one interval apart: it is due on the next scan. Hence "first after the
    timeout, then every interval, at most `check_max` times"."""
    if times_checked >= check_max:
        return Verdict.DISCARD
    if times_checked > 0:
        return Verdict.CHECK
    age = now_ms - min(born_ms, stored_ms)
    if age < timeout_ms:
        return Verdict.WAIT
    if age < immunity_ms(immunity_raw, timeout_ms):
        return Verdict.REQUEUE
    return Verdict.CHECK


def end_mismatch(
    *,
    half_group: str | None,
    half_queue_offset: int,
    half_commit_log_offset: int,
    producer_group: str,
    tran_state_table_offset: int,
    commit_log_offset: int,
) -> str | None:
    """The remark (Java's words) when an END_TRANSACTION does not match its half."""
    if half_group != producer_group:
        return "The producer group wrong"
    if half_queue_offset != tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half_commit_log_offset != commit_log_offset:
        return "The commit log offset wrong"
    return None


@dataclass(slots=True)
class _Entry:
    key: str
    op_offset: int
    horizon: int
    resolved_ms: int


class ResolvedLedger:
    """Transactions (by their key, the half's UNIQ_KEY) that have an op record.

    Keyed by transaction rather than by half offset because the check-back
    re-appends a half on every check: one transaction has several half copies,
    and an END for any of them resolves all. An entry is kept while a copy of
    its half may still lie ahead of the scan (the scan has not reached
    `horizon`, the half queue's end when it was resolved) and for `grace_ms`
    after it was resolved, so a late END for an older copy is still seen as a
    repeat. Entries are dropped in op-queue order, so the op offset of the
    first one kept is where a restart must re-read the op queue from."""

    def __init__(self, grace_ms: int) -> None:
        self.grace_ms = grace_ms
        self._entries: deque[_Entry] = deque()
        self._latest: dict[str, _Entry] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._latest

    def __len__(self) -> int:
        return len(self._latest)

    def add(self, key: str, op_offset: int, horizon: int, resolved_ms: int) -> None:
        entry = _Entry(key, op_offset, horizon, resolved_ms)
        self._entries.append(entry)
        self._latest[key] = entry

    def prune(self, scan_progress: int, now_ms: int) -> None:
        """Drop the oldest entries the scan and the grace period have both passed."""
        entries = self._entries
        while entries:
            head = entries[0]
            if head.horizon > scan_progress or now_ms - head.resolved_ms < self.grace_ms:
                return
            entries.popleft()
            if self._latest.get(head.key) is head:
                del self._latest[head.key]

    def first_op_offset(self, default: int) -> int:
        """The op offset a restart re-reads from: the oldest entry kept, else `default`."""
        return self._entries[0].op_offset if self._entries else default
