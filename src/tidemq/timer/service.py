"""The timer service: from a parked message to its delivery, exactly once.

The pieces (see docs/store-format.md, "Timer store"):

1. Parking (the broker, at send): the message is stored in TIMER_TOPIC q0
   (`parking.park`); the commitlog + consumequeue is the durable truth.
2. Enqueue (`_enqueue_batch`, woken by `on_arrival`): tails TIMER_TOPIC q0
   from `enqueue_offset`, copies each raw record into the timer log and
   appends a unit to the timer file of its time bucket; entries of a loaded
   bucket also go into the wheel. Recall markers become RECALL units.
3. Wheel (`wheel.TimerWheel`): only the loaded buckets (every bucket that
   starts before `now + preload_ms`); the next one is loaded `preload_ms`
   before it starts. Loading drops units at or below the delivered
   watermark, duplicates (same source offset), units whose timer log record
   was torn off, and applies recall units.
4. Delivery (`_dispatch_loop`): sleeps until the earliest entry is due (or a
   bucket must be loaded, or it is woken), pops what is due in (eff_ms,
   source offset) order, rebuilds the real messages and stores them with
   `put_many`, `put_chunk` at a time, one put in flight. A failed put is
   retried after `failure_backoff_s`; a put that raised is first checked
   against the commitlog so nothing is stored twice.
5. Checkpoint (`_checkpoint`): taken between two puts, written after the
   timer log and timer files are fsynced; recovery re-enqueues from
   `enqueue_offset` and skips what the commitlog after `scan_from` shows as
   delivered (the TIMER_SOURCE_OFFSET property every delivery carries).
6. Recall: decided synchronously, then a marker is stored in TIMER_TOPIC.
7. Retirement: after a checkpoint, timer files whose span lies wholly at or
   below the watermark and timer log segments whose every record is below it
   are deleted.

Lateness: an entry is never delivered before its eff_ms. The loop wakes for
the earliest entry itself (not at slot boundaries), so the lateness is the
loop's wake-up jitter plus the time the puts ahead of it take; `precision_ms`
is the wheel's slot width (how entries are grouped in memory), and an entry
whose time already passed when it is enqueued is delivered at once (its
effective time is clamped just past the delivery frontier, which keeps the
delivery order and the watermark monotonic).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import properties as props
from tidemq.common.clock import Clock
from tidemq.common.failure_log import FailureEpisode
from tidemq.common.properties import edit_properties
from tidemq.common.tasks import TaskSet
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import peek_header, peek_properties
from tidemq.store.api import (
    STORED_STATUSES,
    BatchPutResult,
    DispatchRequest,
    GetStatus,
    MessageStore,
    MessageToStore,
    PutStatus,
)
from tidemq.timer.buckets import TimerFiles, Unit, UnitKind, bucket_start, key_hash
from tidemq.timer.checkpoint import TimerCheckpoint, load_checkpoint, save_checkpoint
from tidemq.timer.inventory import waiting_units
from tidemq.timer.log import LogRecord, TimerLog, TimerLogError
from tidemq.timer.parking import (
    TIMER_QUEUE_ID,
    TIMER_SOURCE_OFFSET,
    TIMER_TOPIC,
    delete_key,
    recall_marker,
)
from tidemq.timer.records import read_parked
from tidemq.timer.scan_floor import commitlog_floor
from tidemq.timer.wheel import TimerWheel, WheelEntry

log = logging.getLogger(__name__)

TIMER_GROUP = "TIMER_SERVICE"
"""The group name given to the store's reads (stores do not use it)."""
"""Put outcomes after which the message is in the store."""
REFUSED_STATUSES = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
"""Put outcomes that no retry can change: the message is skipped (logged)."""

PutMany = Callable[[Sequence[MessageToStore]], Awaitable[BatchPutResult]]

_NEVER = 1 << 62
INHERITED_CLOCK_SLACK_MS = 60_000
"""How far the old master's clock may have stepped back without a delivery it
made falling before the promoted replica's search (it would then be repeated)."""


@dataclass(frozen=True, slots=True)
class TimerLag:
    """How far behind the timer service is, at one moment (RocketMQ's
    DefaultStoreMetricsManager timer gauges, from TimerMessageStore)."""

    enqueue_lag: int
    """Parked messages not yet read into the timer files (getEnqueueBehindMessages)."""
    enqueue_latency_ms: int
    """Age of the oldest of those (getEnqueueBehindMillis)."""
    dequeue_lag: int
    """Timers due and not yet delivered (getDequeueBehindMessages)."""
    dequeue_latency_ms: int
    """How long the earliest of those has been due (getDequeueBehind)."""
    timing: int
    """Timers waiting: in the wheel, in timer files not loaded yet (recall
    markers counted as well) and parked but not read yet (rocketmq_timing_messages,
    which RocketMQ also keeps per topic)."""


@dataclass(frozen=True)
class TimerSettings:
    precision_ms: int = 100
    """Wheel slot width (10..1000)."""
    bucket_span_ms: int = 60_000
    """One timer file per span of delivery time."""
    checkpoint_interval_s: float = 1.0
    preload_ms: int | None = None
    """How long before its start a bucket is loaded; None: half a span."""
    segment_size: int = 64 * 1024 * 1024
    """Timer log segment size."""
    put_chunk: int = 512
    """Most messages per delivery put."""
    enqueue_batch: int = 512
    """Most TIMER_TOPIC entries read per enqueue step."""
    failure_backoff_s: float = 0.5
    """Wait before retrying a failed delivery put."""
    stop_grace_s: float = 5.0
    """How long `stop` lets a delivery put in flight finish."""
    idle_poll_s: float = 1.0
    """Longest sleep of the loops (they are woken earlier when there is work)."""
    fsync: bool = True
    """fsync the timer log and files before each checkpoint (off: benchmarks of async flush)."""

    def __post_init__(self) -> None:
        if not 10 <= self.precision_ms <= 1000:
            raise ValueError(f"timer precision must be 10..1000 ms, not {self.precision_ms}")
        if self.bucket_span_ms < 1000:
            raise ValueError(f"the bucket span must be >= 1000 ms, not {self.bucket_span_ms}")
        if self.checkpoint_interval_s <= 0 or self.failure_backoff_s <= 0:
            raise ValueError("timer intervals must be positive")
        if self.idle_poll_s <= 0 or self.stop_grace_s < 0:
            raise ValueError("timer intervals must be positive")
        if self.put_chunk < 1 or self.enqueue_batch < 1:
            raise ValueError("timer batch sizes must be at least 1")
        if self.preload_ms is not None and not 0 < self.preload_ms <= self.bucket_span_ms:
            raise ValueError("preload_ms must be in (0, bucket_span_ms]")

    @property
    def preload(self) -> int:
        return self.preload_ms if self.preload_ms is not None else self.bucket_span_ms // 2


class RecallOutcome(enum.Enum):
    RECALLED = "RECALLED"
    """The marker is stored: the message will never be delivered."""
    ALREADY_DELIVERED = "ALREADY_DELIVERED"
    """Its time was reached and it was handed to a delivery put."""
    TOO_LATE = "TOO_LATE"
    """Its delivery time has passed (it is being or was delivered)."""
    FAILED = "FAILED"
    """The marker could not be stored; nothing changed (the caller may retry)."""


@dataclass(frozen=True, slots=True)
class InheritedProgress:
    """How far the previous master's timer had got, as a slave copied it
    (tidemq.broker.timer_progress): the TIMER_TOPIC offset it had enqueued up
    to, and its last read time (every entry it had enqueued and due before
    that time was delivered). A broker that becomes master with no timer
    state of its own starts from it, as RocketMQ 5's TimerMessageStore
    dequeues from the copied lastReadTimeMs once its role changes."""

    queue_offset: int
    read_time_ms: int


class TimerService:
    def __init__(
        self,
        store: MessageStore,
        directory: Path,
        clock: Clock,
        put_many: PutMany,
        settings: TimerSettings | None = None,
        inherited: InheritedProgress | None = None,
    ) -> None:
        self.store = store
        self.directory = directory
        self.clock = clock
        self.settings = settings = settings or TimerSettings()
        self._put_many = put_many
        self._log = TimerLog(directory / "timerlog", settings.segment_size)
        self._files = TimerFiles(directory / "buckets", settings.bucket_span_ms)
        self._wheel = TimerWheel(settings.precision_ms)
        self._enqueue_offset = 0
        self._frontier: tuple[int, int] = (-1, -1)
        """(eff_ms, source offset) of the last entry handed to a put."""
        self._watermark: tuple[int, int] = (-1, -1)
        """(eff_ms, source offset) of the last entry whose put succeeded."""
        self._loaded_until = -_NEVER
        """Every bucket starting before this is in the wheel."""
        self._retire_from = 0
        self._recall_marks: dict[int, int] = {}
        """Key hash -> deliver_ms of recalls whose marker is not enqueued yet."""
        self._delivered_before_start: set[int] = set()
        self._forget_delivered_after_ms = -_NEVER
        self._inherited = inherited
        """Used at start only, and only with no timer state of this broker's own."""
        self._inherited_from: int | None = None
        """While starting from `_inherited`: the lowest commitlog offset of a
        parked entry enqueued again (its delivery, if any, lies after it)."""
        self._inherited_earliest_ms = _NEVER
        """While starting from `_inherited`: the earliest delivery time of an entry
        enqueued again (its delivery, if any, was stored no sooner)."""
        self._in_doubt_scan_from: int | None = None
        self._saved: TimerCheckpoint | None = None
        """The checkpoint last written (an equal one, with nothing to sync, is not)."""
        self._next_wake_ms = _NEVER
        self._tasks = TaskSet("timer")
        self._put_lock = asyncio.Lock()
        self._checkpoint_lock = asyncio.Lock()
        self._wake_dispatch = asyncio.Event()
        self._wake_enqueue = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._running = False
        self._started = False
        self._counters = dict.fromkeys(
            (
                "enqueued",
                "recall_units",
                "delivered",
                "recalled",
                "deduplicated",
                "undeliverable",
                "put_failures",
                "puts",
                "dispatch_passes",
                "checkpoints",
                "checkpoints_skipped",
                "late_max_ms",
                "buckets_loaded",
                "buckets_retired",
                "segments_retired",
                "inherited_skipped",
                "inherited_scanned_bytes",
            ),
            0,
        )

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Recover (checkpoint, torn tails, deliveries since the checkpoint,
        re-enqueue, due buckets), then start the enqueue, delivery and
        checkpoint tasks."""
        if self._running:
            return
        if self._started:
            raise RuntimeError("a TimerService starts once; make a new one to restart")
        self._started = True
        self.directory.mkdir(parents=True, exist_ok=True)
        checkpoint = load_checkpoint(self.directory)
        had_files = bool(self._files.starts()) or (self.directory / "timerlog").exists()
        inheriting = checkpoint is None and not had_files and self._inherited is not None
        if checkpoint is None:
            checkpoint = TimerCheckpoint()
            if not had_files:
                # Nothing was ever delivered from here: no scan of the whole commitlog.
                checkpoint.scan_from = self.store.commitlog_max_offset()
        self._log.open(checkpoint.log_end, checkpoint.segments)
        self._enqueue_offset = checkpoint.enqueue_offset
        self._watermark = self._frontier = checkpoint.watermark
        if inheriting:
            self._inherit()
        else:
            self._delivered_before_start = self._scan_delivered(checkpoint.scan_from)
        now = self.clock.now_ms()
        self._forget_delivered_after_ms = now + self.settings.preload + 1
        while self._enqueue_batch():
            pass
        starts = self._files.starts()
        self._retire_from = starts[0] if starts else 0
        self._load_due(now)
        if self._delivered_before_start:
            log.info(
                "timer: %d deliveries after the last checkpoint will not be repeated",
                len(self._delivered_before_start),
            )
        self._wake_dispatch = asyncio.Event()
        self._wake_enqueue = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._put_lock = asyncio.Lock()
        self._checkpoint_lock = asyncio.Lock()
        self._running = True
        self._tasks.spawn(self._enqueue_loop())
        self._tasks.spawn(self._dispatch_loop())
        self._tasks.spawn(self._checkpoint_loop())

    async def stop(self) -> None:
        """Let a delivery put in flight finish (up to stop_grace_s), stop the
        tasks, fsync and write the checkpoint."""
        if not self._running:
            return
        self._running = False
        self._stop_event.set()
        self._wake_dispatch.set()
        self._wake_enqueue.set()
        await self._tasks.wait(self.settings.stop_grace_s)
        await self._tasks.cancel_all()
        try:
            await self._checkpoint()
        finally:
            self._log.close()

    @property
    def running(self) -> bool:
        return self._running

    def on_arrival(self, request: DispatchRequest) -> None:
        """The store's arrival listener: a message parked in TIMER_TOPIC wakes the enqueue side."""
        if request.topic == TIMER_TOPIC and self._running:
            self._wake_enqueue.set()

    def wake(self) -> None:
        """Make the loops look again now (after moving a manual clock)."""
        self._wake_dispatch.set()
        self._wake_enqueue.set()

    # -- recall --------------------------------------------------------------

    async def recall(
        self,
        topic: str,
        unique_key: str,
        deliver_ms: int,
        *,
        born_host: bytes = b"\x7f\x00\x00\x01",
        producer_group: str | None = None,
    ) -> RecallOutcome:
        """Cancel the timer message (topic, unique_key) due at deliver_ms.

        Decided before any await: handed to a put already -> ALREADY_DELIVERED;
        time passed -> TOO_LATE; otherwise the key is marked (delivery can no
        longer pick it, even if it is not enqueued yet) and a marker is stored
        in TIMER_TOPIC (FAILED, mark undone, if that put fails)."""
        if deliver_ms <= self._frontier[0]:
            return RecallOutcome.ALREADY_DELIVERED
        if deliver_ms <= self.clock.now_ms():
            return RecallOutcome.TOO_LATE
        khash = key_hash(delete_key(topic, unique_key))
        previous = self._recall_marks.get(khash)
        self._recall_marks[khash] = max(deliver_ms, previous or deliver_ms)
        marker = recall_marker(topic, unique_key, deliver_ms, born_host=born_host)
        try:
            result = await self.store.put_message(marker)
        except Exception:
            log.exception("timer: storing the recall marker of %s failed", unique_key)
            result = None
        if result is None or result.status not in STORED_STATUSES:
            if previous is None:
                self._recall_marks.pop(khash, None)
            if result is not None:
                log.error(
                    "timer: recall marker of %s not stored: %s %s",
                    unique_key,
                    result.status.value,
                    result.remark,
                )
            return RecallOutcome.FAILED
        return RecallOutcome.RECALLED

    # -- observability ---------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters since start plus the current state (all ints)."""
        out = dict(self._counters)
        out.update(
            pending_in_wheel=len(self._wheel),
            wheel_recall_marks=self._wheel.recall_marks,
            pending_recalls=len(self._recall_marks),
            enqueue_offset=self._enqueue_offset,
            enqueue_lag=max(
                self.store.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID) - self._enqueue_offset, 0
            ),
            frontier_ms=self._frontier[0],
            watermark_ms=self._watermark[0],
            loaded_until_ms=self._loaded_until,
            log_segments=len(self._log.segments),
        )
        return out

    def waiting(self) -> tuple[list[Unit], bool]:
        """The timers parked and not yet delivered nor recalled, in delivery
        order, read from the timer files (inventory.py); and whether the
        listing was cut short."""
        return waiting_units(
            (self._files.read(start) for start in self._files.starts()),
            self._watermark,
            recalled=set(self._recall_marks),
            delivered=self._delivered_before_start,
        )

    def lag(self, now_ms: int) -> TimerLag:
        """RocketMQ's timer gauges at `now_ms` (see `TimerLag`)."""
        enqueue_lag = max(
            self.store.max_offset(TIMER_TOPIC, TIMER_QUEUE_ID) - self._enqueue_offset, 0
        )
        enqueue_latency = 0
        if enqueue_lag:
            stored = self.store.store_time(TIMER_TOPIC, TIMER_QUEUE_ID, self._enqueue_offset)
            enqueue_latency = max(0, now_ms - stored) if stored > 0 else 0
        next_due = self._wheel.next_due_ms()
        dequeue_latency = max(0, now_ms - next_due) if next_due is not None else 0
        later = sum(
            units
            for start, units in self._files.unit_counts().items()
            if start >= self._loaded_until
        )
        return TimerLag(
            enqueue_lag=enqueue_lag,
            enqueue_latency_ms=enqueue_latency,
            dequeue_lag=self._wheel.count_due(now_ms),
            dequeue_latency_ms=dequeue_latency,
            timing=len(self._wheel) + later + enqueue_lag,
        )

    # -- recovery: deliveries after the checkpoint -----------------------------

    def _inherit(self) -> None:
        """Start as the new master of a broker whose previous master parked
        timer messages here (a promoted slave): enqueue the whole TIMER_TOPIC
        queue again, except the entries that master had delivered before its
        last read time, then find the deliveries it made after that in the
        commitlog, from the oldest entry enqueued again on (a delivery comes
        after the entry it delivers), or from where records stored at the
        earliest of their delivery times begin, if that is later (a delivery is
        stored no sooner than its time: a timer parked weeks ago does not make
        the search read weeks of log). What it delivered after the slave's last
        copy of its progress and the slave did not get is delivered again:
        at least once, as in RocketMQ."""
        inherited = self._inherited
        assert inherited is not None
        self._inherited_from = self.store.commitlog_max_offset()
        skipped_before = self._counters["inherited_skipped"]
        while self._enqueue_batch():
            pass
        start = self._inherited_from
        self._inherited_from = None
        if self._inherited_earliest_ms < _NEVER:
            stored_no_sooner = (
                self._inherited_earliest_ms - self.settings.precision_ms - INHERITED_CLOCK_SLACK_MS
            )
            start = max(start, commitlog_floor(self.store, stored_no_sooner))
        self._counters["inherited_scanned_bytes"] = max(
            self.store.commitlog_max_offset() - start, 0
        )
        self._delivered_before_start = self._scan_delivered(start)
        log.info(
            "timer: started from the previous master's progress (enqueued to offset %d, "
            "read time %d): %d entries it delivered skipped, %d deliveries found after it "
            "in the last %d bytes of the commitlog",
            inherited.queue_offset,
            inherited.read_time_ms,
            self._counters["inherited_skipped"] - skipped_before,
            len(self._delivered_before_start),
            self._counters["inherited_scanned_bytes"],
        )

    def _delivered_by_predecessor(self, queue_offset: int, eff_ms: int) -> bool:
        """While inheriting: an entry the previous master had enqueued and
        delivered (due before its last read time)."""
        inherited = self._inherited
        return (
            inherited is not None
            and queue_offset < inherited.queue_offset
            and eff_ms < inherited.read_time_ms
        )

    def _scan_delivered(self, start: int) -> set[int]:
        """Source offsets of deliveries stored in the commitlog from `start` on."""
        found: set[int] = set()
        end = self.store.commitlog_max_offset()
        config = getattr(self.store, "config", None)
        file_size = getattr(config, "commitlog_file_size", 0)
        position = start
        while position < end:
            record = self.store.read_by_physical_offset(position)
            if record is None:
                if not file_size:
                    log.warning("timer: cannot scan the commitlog past %d", position)
                    break
                position = (position // file_size + 1) * file_size  # end-of-file blank
                continue
            try:
                size = peek_header(record).total_size
                raw_properties = peek_properties(record)
            except ProtocolError as exc:
                log.warning("timer: commitlog scan stopped at %d: %s", position, exc)
                break
            value = props.PropertyView(raw_properties).get(TIMER_SOURCE_OFFSET)
            if value is not None:
                with contextlib.suppress(ValueError):
                    found.add(int(value))
            position += size
        return found

    # -- enqueue ---------------------------------------------------------------

    async def _enqueue_loop(self) -> None:
        while self._running:
            try:
                moved = self._enqueue_batch()
            except Exception:
                log.exception("timer: enqueue failed; retrying")
                moved = 0
                await asyncio.sleep(self.settings.failure_backoff_s)
            if moved:
                await asyncio.sleep(0)
                continue
            self._wake_enqueue.clear()
            if self._enqueue_batch():
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.idle_poll_s):
                    await self._wake_enqueue.wait()

    def _clamp(self, deliver_ms: int, source: int) -> int:
        """The effective time: past the delivery frontier, so order stays monotonic.
        A late entry whose source comes after the frontier's keeps the frontier's
        millisecond (delivered on the next pass, even by a clock that stands still);
        otherwise it goes one millisecond past."""
        frontier_ms, frontier_source = self._frontier
        if (deliver_ms, source) <= self._frontier:
            return frontier_ms if source > frontier_source else frontier_ms + 1
        return deliver_ms

    def _enqueue_batch(self) -> int:
        """Enqueue the next TIMER_TOPIC entries; how many offsets were consumed."""
        start = self._enqueue_offset
        result = self.store.get_messages(
            TIMER_GROUP, TIMER_TOPIC, TIMER_QUEUE_ID, start, self.settings.enqueue_batch
        )
        if not result.buffers:
            if result.next_begin_offset > start and result.status in (
                GetStatus.OFFSET_TOO_SMALL,
                GetStatus.MESSAGE_WAS_REMOVING,
                GetStatus.NO_MATCHED_MESSAGE,
            ):
                log.error(
                    "timer: TIMER_TOPIC offsets %d..%d are gone from the store (%s)",
                    start,
                    result.next_begin_offset,
                    result.status.value,
                )
                self._enqueue_offset = result.next_begin_offset
                return result.next_begin_offset - start
            return 0
        normal: list[tuple[int, int, bytes, int]] = []
        recalls: list[Unit] = []
        lowest = self._inherited_from  # not None while inheriting (start-up only)
        offsets_known = result.next_begin_offset - start == len(result.buffers)  # no gap
        for index, (buffer, physical) in enumerate(
            zip(result.buffers, result.physical_offsets, strict=True)
        ):
            raw = bytes(buffer)
            try:
                view = props.PropertyView(peek_properties(raw))
                deliver_ms = int(view.get(props.TIMER_OUT_MS, ""))
            except (ProtocolError, ValueError) as exc:
                log.error("timer: parked record at %d is unusable, skipped: %s", physical, exc)
                continue
            eff_ms = self._clamp(deliver_ms, physical)
            delete = view.get(props.TIMER_DEL_UNIQKEY)
            if delete is not None:
                recalls.append(Unit(eff_ms, -1, physical, key_hash(delete), UnitKind.RECALL))
                continue
            if lowest is not None:
                if offsets_known and self._delivered_by_predecessor(start + index, eff_ms):
                    self._counters["inherited_skipped"] += 1
                    continue
                lowest = min(lowest, physical)
                self._inherited_earliest_ms = min(self._inherited_earliest_ms, deliver_ms)
            real_topic = view.get(props.REAL_TOPIC)
            unique_key = view.get(props.UNIQ_KEY)
            khash = key_hash(delete_key(real_topic, unique_key)) if real_topic and unique_key else 0
            normal.append((eff_ms, physical, raw, khash))
        if lowest is not None:
            self._inherited_from = lowest
        positions = self._log.append_many([(eff, src, raw) for eff, src, raw, _ in normal])
        units = [
            Unit(eff, position, src, khash, UnitKind.NORMAL)
            for (eff, src, _, khash), position in zip(normal, positions, strict=True)
        ]
        units.extend(recalls)
        self._files.append(units)
        loaded_until = self._loaded_until
        earliest = _NEVER
        for unit in units:
            if unit.kind is UnitKind.RECALL:
                if unit.eff_ms < loaded_until:
                    self._wheel.recall(unit.key_hash, unit.eff_ms)
                self._recall_marks.pop(unit.key_hash, None)
                continue
            if unit.eff_ms < loaded_until:
                self._wheel.add(
                    WheelEntry(unit.eff_ms, unit.source_offset, unit.log_position, unit.key_hash)
                )
                earliest = min(earliest, unit.eff_ms)
        self._counters["enqueued"] += len(normal)
        self._counters["recall_units"] += len(recalls)
        self._enqueue_offset = result.next_begin_offset
        if earliest < self._next_wake_ms:
            self._wake_dispatch.set()
        return result.next_begin_offset - start

    # -- loading buckets -------------------------------------------------------

    def _load_due(self, now_ms: int) -> None:
        """Load every bucket starting before now + preload that is not loaded yet."""
        horizon = now_ms + self.settings.preload
        if horizon < self._loaded_until:
            return
        span = self.settings.bucket_span_ms
        new_until = bucket_start(horizon, span) + span
        seen: set[int] = set()
        for start in self._files.starts():
            if start >= new_until:
                break
            if start >= self._loaded_until:
                self._admit(self._files.read(start), seen)
                self._counters["buckets_loaded"] += 1
        self._loaded_until = new_until

    def _admit(self, units: list[Unit], seen: set[int]) -> None:
        wheel = self._wheel
        watermark = self._watermark
        delivered = self._delivered_before_start
        for unit in units:
            if unit.kind is UnitKind.RECALL:
                wheel.recall(unit.key_hash, unit.eff_ms)
                continue
            source = unit.source_offset
            if (unit.eff_ms, source) <= watermark or source in seen:
                continue
            if source in delivered:
                self._counters["deduplicated"] += 1
                continue
            if not self._log.holds(unit.log_position):
                continue  # its log record was torn off; enqueued again from the consumequeue
            seen.add(source)
            wheel.add(WheelEntry(unit.eff_ms, source, unit.log_position, unit.key_hash))

    # -- delivery --------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        settings = self.settings
        episode = FailureEpisode(log, "timer: loading a timer file")
        while self._running:
            self._counters["dispatch_passes"] += 1
            now = self.clock.now_ms()
            try:
                self._load_due(now)
            except Exception:
                episode.failed()
                await asyncio.sleep(settings.failure_backoff_s)
                continue
            episode.succeeded()
            due = self._wheel.pop_due(now, settings.put_chunk)
            if due:
                last = due[-1]
                self._frontier = (last.eff_ms, last.source_offset)
                if last.eff_ms > self._forget_delivered_after_ms and self._delivered_before_start:
                    self._delivered_before_start = set()
                await self._deliver(due, now)
                self._watermark = (last.eff_ms, last.source_offset)
                continue
            # Nothing is due or in flight: everything up to now is delivered.
            # Moving the marks lets idle buckets retire and keeps clamping honest.
            if (now, -1) > self._frontier:
                self._frontier = self._watermark = (now, -1)
            next_due = self._wheel.next_due_ms()
            target = min(
                next_due if next_due is not None else _NEVER,
                self._loaded_until - settings.preload,
            )
            self._next_wake_ms = target
            self._wake_dispatch.clear()
            timeout = min(max((target - now) / 1000, 0.0), settings.idle_poll_s)
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._wake_dispatch.wait()
            else:
                await asyncio.sleep(0)
            self._next_wake_ms = _NEVER

    def _build(self, due: list[WheelEntry], now_ms: int) -> list[tuple[int, MessageToStore]]:
        """(source offset, message) for each entry still to deliver."""
        out: list[tuple[int, MessageToStore]] = []
        marks = self._recall_marks
        delivered = self._delivered_before_start
        late_max = self._counters["late_max_ms"]
        for entry in due:
            if entry.key_hash and entry.key_hash in marks:
                self._counters["recalled"] += 1
                continue
            if entry.source_offset in delivered:
                self._counters["deduplicated"] += 1
                continue
            try:
                record = self._log.read(entry.log_position)
                message = self._delivery_message(entry, record, now_ms)
            except Exception as exc:  # one bad record must not stop the others
                self._counters["undeliverable"] += 1
                log.error(
                    "timer: entry of commitlog offset %d cannot be delivered, skipped: %s",
                    entry.source_offset,
                    exc,
                )
                continue
            late_max = max(late_max, now_ms - entry.eff_ms)
            out.append((entry.source_offset, message))
        self._counters["late_max_ms"] = late_max
        return out

    def _delivery_message(
        self, entry: WheelEntry, record: LogRecord, now_ms: int
    ) -> MessageToStore:
        if record.source_offset != entry.source_offset:
            raise TimerLogError(
                f"timer log record at {entry.log_position} belongs to {record.source_offset}"
            )
        parked = read_parked(record.raw)
        view = props.PropertyView(parked.properties)
        real_topic = view.get(props.REAL_TOPIC, "")
        if not real_topic or real_topic == TIMER_TOPIC:
            raise ValueError("no valid REAL_TOPIC")
        queue_id = int(view.get(props.REAL_QID, ""))
        if queue_id < 0:
            raise ValueError(f"REAL_QID {queue_id} is negative")
        properties = edit_properties(
            parked.properties,
            {
                props.REAL_TOPIC: None,
                props.REAL_QID: None,
                props.TIMER_ENQUEUE_MS: str(parked.store_timestamp),
                props.TIMER_DEQUEUE_MS: str(now_ms),
                TIMER_SOURCE_OFFSET: str(entry.source_offset),
            },
        )
        return MessageToStore(
            topic=real_topic,
            queue_id=queue_id,
            body=parked.body,
            properties=properties,
            flag=parked.flag,
            sys_flag=parked.sys_flag,
            born_timestamp=parked.born_timestamp,
            born_host=parked.born_host,
            born_port=parked.born_port,
            reconsume_times=parked.reconsume_times,
        )

    async def _deliver(self, due: list[WheelEntry], now_ms: int) -> None:
        """Store the due entries in their real topics; returns once every one
        is stored or skipped (a failed put is retried, never skipped)."""
        pending = self._build(due, now_ms)
        while pending:
            async with self._put_lock:
                before = self.store.commitlog_max_offset()
                try:
                    result: BatchPutResult | None = await self._put_many([m for _, m in pending])
                except asyncio.CancelledError:
                    self._in_doubt_scan_from = before  # it may have been stored
                    raise
                except Exception:
                    log.exception("timer: delivery put of %d raised", len(pending))
                    result = None
                self._counters["puts"] += 1
                if result is None:
                    stored = self._scan_delivered(before)
                    pending = [(src, m) for src, m in pending if src not in stored]
                    self._counters["delivered"] += len(stored)
                elif result.status in STORED_STATUSES:
                    self._counters["delivered"] += len(pending)
                    return
                elif result.status in REFUSED_STATUSES and len(pending) > 1:
                    await self._deliver_one_by_one(pending)
                    return
                elif result.status in REFUSED_STATUSES:
                    self._refused(pending[0][0], result)
                    return
                else:
                    log.error(
                        "timer: delivery put failed (%s %s), retry in %.1f s",
                        result.status.value,
                        result.remark,
                        self.settings.failure_backoff_s,
                    )
            if pending:
                self._counters["put_failures"] += 1
                await asyncio.sleep(self.settings.failure_backoff_s)

    async def _deliver_one_by_one(self, pending: list[tuple[int, MessageToStore]]) -> None:
        for source, message in pending:
            await self._deliver_single(source, message)

    async def _deliver_single(self, source: int, message: MessageToStore) -> None:
        while True:
            before = self.store.commitlog_max_offset()
            try:
                result: BatchPutResult | None = await self._put_many([message])
            except asyncio.CancelledError:
                self._in_doubt_scan_from = before
                raise
            except Exception:
                log.exception("timer: delivery put raised")
                result = None
            if result is None:
                if source in self._scan_delivered(before):
                    self._counters["delivered"] += 1
                    return
            elif result.status in STORED_STATUSES:
                self._counters["delivered"] += 1
                return
            elif result.status in REFUSED_STATUSES:
                self._refused(source, result)
                return
            self._counters["put_failures"] += 1
            await asyncio.sleep(self.settings.failure_backoff_s)

    def _refused(self, source: int, result: BatchPutResult) -> None:
        self._counters["undeliverable"] += 1
        log.error(
            "timer: the store refuses the delivery of commitlog offset %d (%s %s); skipped",
            source,
            result.status.value,
            result.remark,
        )

    # -- checkpoint and retirement ---------------------------------------------

    async def _checkpoint_loop(self) -> None:
        interval = self.settings.checkpoint_interval_s
        episode = FailureEpisode(log, "timer: checkpoint")
        while self._running:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stop_event.wait()
            if self._stop_event.is_set():
                return
            try:
                await self._checkpoint()
            except Exception:
                episode.failed()
                continue
            episode.succeeded()

    async def _checkpoint(self) -> None:
        async with self._checkpoint_lock:
            async with self._put_lock:  # no delivery put in flight: scan_from is exact
                scan_from = self.store.commitlog_max_offset()
                if self._in_doubt_scan_from is not None:
                    scan_from = min(scan_from, self._in_doubt_scan_from)
                checkpoint = TimerCheckpoint(
                    enqueue_offset=self._enqueue_offset,
                    watermark_ms=self._watermark[0],
                    watermark_source=self._watermark[1],
                    scan_from=scan_from,
                    log_end=self._log.end,
                    segments=self._log.bookkeeping(),
                )
                log_fds, log_new = self._log.take_unsynced()
                dirty, files_new = self._files.take_dirty()
            if checkpoint == self._saved and not (log_fds or log_new or dirty or files_new):
                self._counters["checkpoints_skipped"] += 1  # idle: no write, no fsync
                return
            if self.settings.fsync:
                try:
                    await asyncio.to_thread(self._sync, log_fds, log_new, dirty, files_new)
                except BaseException:
                    # nothing may claim these files synced: the next try syncs them again
                    self._log.requeue_unsynced(log_fds, log_new)
                    self._files.requeue_dirty(dirty, files_new)
                    raise
            await asyncio.to_thread(save_checkpoint, self.directory, checkpoint)
            self._saved = checkpoint
            self._counters["checkpoints"] += 1
            self._retire(checkpoint.watermark_ms)

    def _sync(self, log_fds: list[int], log_new: bool, dirty: list[int], files_new: bool) -> None:
        self._log.sync_now(log_fds, log_new)
        self._files.sync_now(dirty, files_new)

    def _retire(self, watermark_ms: int) -> None:
        span = self.settings.bucket_span_ms
        limit = min(watermark_ms - span, self._loaded_until - span)
        if (limit - self._retire_from) // span > 64:  # far behind: list instead of stepping
            candidates = [s for s in self._files.starts() if s <= limit]
        else:
            candidates = list(range(self._retire_from, limit + 1, span))
        for start in candidates:
            if self._files.delete(start):
                self._counters["buckets_retired"] += 1
        if limit >= self._retire_from:
            self._retire_from = bucket_start(limit, span) + span
        gone = self._log.retire(watermark_ms)
        self._counters["segments_retired"] += len(gone)
