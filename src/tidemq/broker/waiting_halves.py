"""Transactions waiting for their producer's decision, as people look at them
(the dashboard's Transactions panel): the half messages not resolved yet.

The half queue is read from the check-back's progress (everything before it
was resolved or checked and re-appended past it) to its end; a half whose
transaction the ledger knows as resolved is left out, and of the copies the
check-back re-appended only the newest is shown (it carries the check count).
Reading is bounded: at most `MAX_SCANNED` records a listing.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.broker.transaction_halves import decode_half
from tidemq.broker.transaction_policy import CHECK_GROUP, HALF_TOPIC, check_times
from tidemq.broker.transactions import BrokerTransactions
from tidemq.common import properties as props

__all__ = ["MAX_SCANNED", "WaitingHalf", "waiting_halves"]

MAX_SCANNED = 20_000
_PAGE = 256


@dataclass(frozen=True, slots=True)
class WaitingHalf:
    transaction_id: str
    """The transaction's key (the producer's UNIQ_KEY)."""
    producer_group: str
    topic: str
    """Where the message goes when committed (REAL_TOPIC)."""
    born_ms: int
    stored_ms: int
    """When the oldest copy still ahead of the check-back was stored."""
    check_times: int
    """Check-backs sent so far."""
    body_size: int


def waiting_halves(transactions: BrokerTransactions) -> tuple[list[WaitingHalf], bool]:
    """The unresolved transactions, oldest first; and whether the scan stopped early."""
    store = transactions.store
    offset = max(transactions.progress, store.min_offset(HALF_TOPIC, 0))
    end = store.max_offset(HALF_TOPIC, 0)
    newest: dict[str, WaitingHalf] = {}
    scanned = 0
    while offset < end and scanned < MAX_SCANNED:
        page = store.get_messages(CHECK_GROUP, HALF_TOPIC, 0, offset, _PAGE)
        if page.next_begin_offset <= offset:
            break
        for buffer in page.buffers:
            scanned += 1
            half = decode_half(buffer)
            if half is None or half.key in transactions.ledger:
                continue
            record = half.record
            first = newest.get(half.key)
            newest[half.key] = WaitingHalf(
                transaction_id=half.key,
                producer_group=half.producer_group or "",
                topic=record.properties.get(props.REAL_TOPIC, ""),
                born_ms=record.born_timestamp,
                stored_ms=first.stored_ms if first is not None else record.store_timestamp,
                check_times=check_times(record.properties.get(props.TRANSACTION_CHECK_TIMES)),
                body_size=len(record.body),
            )
        offset = page.next_begin_offset
    rows = sorted(newest.values(), key=lambda h: (h.born_ms, h.transaction_id))
    return rows, offset < end
