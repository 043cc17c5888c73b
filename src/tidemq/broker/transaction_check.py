"""The check-back: ask a producer about half messages nobody ended.

Every `transaction_check_interval_ms` the half queue is scanned from the
progress offset up to where it ended when the scan began (copies appended by
this scan wait for the next one). For each half, in store order:

- its transaction is resolved (ledger): skipped;
- `transaction_policy.decide` says WAIT (younger than the timeout): the scan
  stops, everything behind it is younger;
- DISCARD (checked `transaction_check_max` times): dropped with a WARNING
  naming the real topic, the message id and the producer group;
- REQUEUE (inside its own CHECK_IMMUNITY_TIME_IN_SECONDS): re-appended as is;
- CHECK: re-appended with TRANSACTION_CHECK_TIMES + 1 (Java's putBackHalfMsg,
  so the count is durable), then CHECK_TRANSACTION_STATE about the copy goes
  oneway to one live producer connection of its group, picked at random among
  those registered, so a producer that crashed mid-transaction is asked on
  another of its group. With none alive the attempt still counts (INFO log).

Progress moves past a half once it is dealt with; a re-append that fails
stops the scan there (it is retried next time, nothing is skipped).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidemq.broker.transaction_halves import StoredHalf, check_command, decode_half, half_copy
from tidemq.broker.transaction_policy import (
    CHECK_GROUP,
    HALF_TOPIC,
    ResolvedLedger,
    Verdict,
    check_times,
    decide,
)
from tidemq.common import properties as props
from tidemq.protocol.errors import ProtocolError
from tidemq.store.api import STORED_STATUSES
from tidemq.transport.errors import RemotingError

if TYPE_CHECKING:
    from tidemq.broker.config import BrokerConfig
    from tidemq.broker.consumers import ProducerManager
    from tidemq.common.clock import Clock
    from tidemq.store.api import MessageStore


class CheckOwner(Protocol):
    """What the check-back needs of the transactions it works for
    (BrokerTransactions; a Protocol so that neither module imports the other)."""

    config: BrokerConfig
    store: MessageStore
    clock: Clock
    producers: ProducerManager
    ledger: ResolvedLedger
    lock: asyncio.Lock
    progress: int

    def commit_progress(self) -> None: ...

    def discarded(self, half: StoredHalf) -> None: ...


__all__ = ["CheckBack", "ScanReport"]

log = logging.getLogger(__name__)

_PAGE = 32
_STORED = STORED_STATUSES


@dataclass(slots=True)
class ScanReport:
    """What one scan did (for tests and the log)."""

    skipped: int = 0
    checked: int = 0
    requeued: int = 0
    discarded: int = 0
    sent: int = 0
    """Checks that reached a producer connection (`checked` minus those with none)."""


class CheckBack:
    """The scan loop of one BrokerTransactions."""

    def __init__(self, owner: CheckOwner) -> None:
        self.owner = owner
        self.totals = ScanReport()

    async def run(self) -> None:
        interval_s = self.owner.config.transaction_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.scan()
            except Exception:
                log.exception("transaction check-back scan failed")

    async def scan(self) -> ScanReport:
        """One pass over the half queue (see the module docstring)."""
        owner = self.owner
        store = owner.store
        report = ScanReport()
        end = store.max_offset(HALF_TOPIC, 0)
        try:
            while owner.progress < end:
                page = store.get_messages(CHECK_GROUP, HALF_TOPIC, 0, owner.progress, _PAGE)
                if not page.buffers:
                    if page.next_begin_offset <= owner.progress:
                        break
                    owner.progress = min(page.next_begin_offset, end)
                    continue
                records = [
                    (bytes(buf), offset)
                    for buf, offset in zip(page.buffers, page.queue_offsets, strict=True)
                    if owner.progress <= offset < end
                ]
                if not records:
                    break
                for raw, offset in records:
                    async with owner.lock:
                        if not await self._visit(raw, report):
                            return report
                        owner.progress = offset + 1
                # A page may pass without one suspension (resolved halves are
                # skipped, and an async-flush append can finish at once): let
                # the broker's other work run between pages.
                await asyncio.sleep(0)
        finally:
            owner.commit_progress()
            self._add_to_totals(report)
        return report

    def _add_to_totals(self, report: ScanReport) -> None:
        totals = self.totals
        totals.skipped += report.skipped
        totals.checked += report.checked
        totals.requeued += report.requeued
        totals.discarded += report.discarded
        totals.sent += report.sent

    async def _visit(self, raw: bytes, report: ScanReport) -> bool:
        """Deal with one half; False stops the scan before it."""
        owner = self.owner
        half = decode_half(raw)
        if half is None:
            log.warning("an unreadable record in %s was skipped", HALF_TOPIC)
            report.skipped += 1
            return True
        if half.key in owner.ledger:
            report.skipped += 1
            return True
        record = half.record
        times = check_times(record.properties.get(props.TRANSACTION_CHECK_TIMES))
        verdict = decide(
            owner.clock.now_ms(),
            times_checked=times,
            born_ms=record.born_timestamp,
            stored_ms=record.store_timestamp,
            timeout_ms=owner.config.transaction_timeout_ms,
            immunity_raw=record.properties.get(props.CHECK_IMMUNITY_TIME_IN_SECONDS),
            check_max=owner.config.transaction_check_max,
        )
        if verdict is Verdict.WAIT:
            return False
        if verdict is Verdict.DISCARD:
            self._discard(half, f"it was checked {times} times without an answer")
            owner.discarded(half)
            report.discarded += 1
            return True
        try:
            half.real_queue()
        except ValueError as exc:
            self._discard(half, str(exc))
            owner.discarded(half)
            report.discarded += 1
            return True
        if verdict is Verdict.REQUEUE:
            if await self._append(half, times) is None:
                return False
            report.requeued += 1
            return True
        copy = await self._append(half, times + 1)
        if copy is None:
            return False
        report.checked += 1
        if self._ask_producer(copy, times + 1):
            report.sent += 1
        return True

    @staticmethod
    def _discard(half: StoredHalf, why: str) -> None:
        record = half.record
        log.warning(
            "transaction half message discarded: topic %s, msg id %s, producer group %s: %s",
            record.properties.get(props.REAL_TOPIC, "?"),
            half.key,
            half.producer_group,
            why,
        )

    async def _append(self, half: StoredHalf, times: int) -> StoredHalf | None:
        """Re-append `half` with the check count `times`: the stored copy, or None."""
        store = self.owner.store
        result = await store.put_message(half_copy(half, times))
        if result.status not in _STORED:
            log.warning(
                "re-appending half message %s failed (%s: %s); retried on the next scan",
                half.key,
                result.status.value,
                result.remark,
            )
            return None
        raw = store.read_by_physical_offset(result.physical_offset)
        copy = decode_half(bytes(raw)) if raw is not None else None
        if copy is None:
            log.error("the re-appended half message %s cannot be read back", half.key)
        return copy

    def _ask_producer(self, copy: StoredHalf, times: int) -> bool:
        """CHECK_TRANSACTION_STATE to one live producer of the group; False if none."""
        group = copy.producer_group or ""
        channels = [
            channel
            for channel in self.owner.producers.members(group)
            if not channel.connection.closed
        ]
        if not channels:
            log.info(
                "no live producer of group %s to check transaction %s (check %d)",
                group,
                copy.key,
                times,
            )
            return False
        channel = random.choice(channels)
        try:
            channel.connection.send_oneway(check_command(copy))
        except (RemotingError, ProtocolError, OSError, ValueError) as exc:
            log.info("checking transaction %s on %s failed: %s", copy.key, channel.client_id, exc)
            return False
        log.debug("checked transaction %s on %s (check %d)", copy.key, channel.client_id, times)
        return True
