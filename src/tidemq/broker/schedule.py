"""Delay levels: park messages in SCHEDULE_TOPIC_XXXX and re-store them when due.

SPEC §5, protocol-remoting.md §5.3; the behaviour of RocketMQ 4.9
`ScheduleMessageService`:

Parking (`schedule`, pure): a message with delay level L (clamped to
1..len(levels)) is stored in `SCHEDULE_TOPIC_XXXX` queue L-1 with its real
topic and queue in the REAL_TOPIC / REAL_QID properties and DELAY = L. The
store writes the delivery time (store time + delay of L) into the
consumequeue tag slot (`store.filters.make_tags_code_rule`), so the
scheduler can tell whether a message is due without reading it.

Delivery: one task per level reads its queue in order from the level's
progress offset. If the head is not due, that level waits (at most
`poll_interval_s`, 100 ms like Java's DELAY_FOR_A_WHILE, or until
`notify_parked`) and nothing behind it is looked at; messages of a level
are due in store order, since they share one delay. An empty level waits
for `notify_parked` (which the store's arrival listener `on_arrival` calls
for every parked message) or at most `idle_poll_s` (1 s): Java polls every
level every 100 ms because nothing tells it of an arrival; here 18 idle
levels polling that often took a tenth of the broker's event-loop time under
a light load (py-spy, 1,000 msg/s) and 8 ms of CPU a second when idle. A due message is read
again from the commitlog (`read_by_physical_offset` + `decode_record`) and
re-stored with `put` into REAL_TOPIC / REAL_QID with its body (as stored,
COMPRESSED bit kept), flag, sysFlag, born timestamp and host, reconsume
times and properties, DELAY removed and REAL_* kept (the store gives it a
new commit-log offset, msg id, queue offset and store time). A delivery
time further ahead than now + the level's delay (the clock went back) is
treated as now (Java's `correctDeliverTimestamp`).

The progress of a level moves past a message only once `put` stored it
(PUT_OK, or FLUSH_DISK_TIMEOUT: the record is written and dispatched, so
storing it again would duplicate it). Any other status, or an exception,
is retried after `failure_backoff_s` (10 s like Java's DELAY_FOR_A_PERIOD)
and the level does not move on: a message is never skipped because a put
failed. A parked record that cannot be delivered at all (gone from the
commitlog, undecodable, no valid REAL_TOPIC / REAL_QID) is logged and
skipped, as Java does; waiting would block its level forever.

Progress is the JSON file {"offsetTable": {"<level>": next queue offset}}
(Java's delayOffset.json), written atomically every `persist_interval_s`
(10 s, Java's flushDelayOffsetInterval) and on `stop`. After a restart
delivery resumes from the persisted offsets, so nothing is lost, but the
messages delivered after the last persist are delivered again: after a
crash that is up to `persist_interval_s` of deliveries; after a clean
`stop` nothing, unless a `put` in flight did not finish within
`stop_grace_s`. Consumers must be idempotent (they must be anyway).

The scheduler's `levels_ms` must equal the store's delay levels, since the
store computes the delivery times. `put` must store the message as given
(not park it again because of its properties).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

from tidemq.broker.retry import split_address
from tidemq.common import properties as props
from tidemq.common.atomic_file import write_atomically
from tidemq.common.clock import Clock
from tidemq.common.failure_log import FailureEpisode
from tidemq.common.message import MessageExt
from tidemq.common.properties import edit_properties
from tidemq.record.codec import decode_record, peek_header, peek_topic_and_properties
from tidemq.store.api import (
    STORED_STATUSES,
    DispatchRequest,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageToStore,
    PutResult,
    PutStatus,
)
from tidemq.store.config import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

SCHEDULE_GROUP = "SCHEDULE_SERVICE"
"""The group name given to the store's reads (stores do not use it)."""
DEFAULT_POLL_INTERVAL_S = 0.1
"""Java's DELAY_FOR_A_WHILE: longest wait before a level whose head is not due looks again."""
DEFAULT_IDLE_POLL_S = 1.0
"""Longest wait of an empty level: an arrival wakes it earlier (`on_arrival`)."""
DEFAULT_FAILURE_BACKOFF_S = 10.0
"""Java's DELAY_FOR_A_PERIOD: wait after a failed re-store."""
DEFAULT_PERSIST_INTERVAL_S = 10.0
"""Java's flushDelayOffsetInterval."""
DEFAULT_STOP_GRACE_S = 5.0
"""How long `stop` lets a put in flight finish so its progress is recorded."""
DEFAULT_BATCH_SIZE = 32

"""Put outcomes after which the message is in the store (progress moves on)."""

PutFunction = Callable[[MessageToStore], Awaitable[PutResult]]


class ScheduleStore(Protocol):
    """What the scheduler reads from the store (both stores provide it)."""

    def get_messages(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        message_filter: MessageFilter | None = None,
        max_bytes: int | None = None,
    ) -> GetResult: ...

    def read_by_physical_offset(self, physical_offset: int) -> memoryview | bytes | None: ...


# -- pure helpers ---------------------------------------------------------------


def delivery_message(record: MessageExt, raw_properties: str | None = None) -> MessageToStore:
    """The message that replaces a due parked `record` in its real topic and queue.

    `record` is decoded without decompression. `raw_properties` is the
    record's property string, kept byte for byte except DELAY when given;
    otherwise `record.properties` is re-encoded. ValueError when REAL_TOPIC
    or REAL_QID is missing or malformed.
    """
    real_topic = record.properties.get(props.REAL_TOPIC, "")
    real_qid = record.properties.get(props.REAL_QID, "")
    if not real_topic or real_topic == SCHEDULE_TOPIC:
        raise ValueError(f"parked message {record.msg_id} has no valid REAL_TOPIC")
    try:
        queue_id = int(real_qid)
    except ValueError:
        raise ValueError(f"parked message {record.msg_id} has REAL_QID {real_qid!r}") from None
    if queue_id < 0:
        raise ValueError(f"parked message {record.msg_id} has REAL_QID {real_qid!r}")
    if raw_properties is None:
        remaining = {k: v for k, v in record.properties.items() if k != props.DELAY}
        properties = props.encode_properties(remaining)
    else:
        properties = edit_properties(raw_properties, {props.DELAY: None})
    return stored_again(record, real_topic, queue_id, properties)


def stored_again(
    record: MessageExt,
    topic: str,
    queue_id: int,
    properties: str,
    *,
    sys_flag: int | None = None,
) -> MessageToStore:
    """`record` to be stored anew in `topic` / `queue_id` with `properties`:
    body (as stored), flag, sysflag (unless given), born time and host and
    reconsume times kept. How the delay scheduler and the transaction service
    move a stored message to where it belongs."""
    born_host, born_port = split_address(record.born_host)
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=record.body,
        properties=properties,
        flag=record.flag,
        sys_flag=record.sys_flag if sys_flag is None else sys_flag,
        born_timestamp=record.born_timestamp,
        born_host=born_host,
        born_port=born_port,
        reconsume_times=record.reconsume_times,
    )


class _TagsCodeProbe:
    """A read filter that accepts everything and records the tag slots it is
    shown, in order: how the scheduler sees the delivery times the store keeps
    in the consumequeue (the read API returns records, not tag slots)."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    def matches_tags_code(self, tags_code: int) -> bool:
        self.codes.append(tags_code)
        return True

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        return True

    @property
    def needs_properties(self) -> bool:
        return False


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _retrieve_exception(task: asyncio.Future[PutResult]) -> None:
    if not task.cancelled():
        task.exception()


# -- the scheduler ----------------------------------------------------------------


class DelayScheduler:
    def __init__(
        self,
        store: ScheduleStore,
        levels_ms: tuple[int, ...],
        progress_path: Path,
        clock: Clock,
        put: PutFunction,
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        idle_poll_s: float = DEFAULT_IDLE_POLL_S,
        failure_backoff_s: float = DEFAULT_FAILURE_BACKOFF_S,
        persist_interval_s: float = DEFAULT_PERSIST_INTERVAL_S,
        stop_grace_s: float = DEFAULT_STOP_GRACE_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not levels_ms:
            raise ValueError("at least one delay level is needed")
        if any(delay < 0 for delay in levels_ms):
            raise ValueError("delay levels cannot be negative")
        if min(poll_interval_s, idle_poll_s, failure_backoff_s, persist_interval_s) <= 0:
            raise ValueError("intervals must be positive")
        if batch_size < 1:
            raise ValueError("the batch size must be at least 1")
        self._store = store
        self._levels_ms = tuple(levels_ms)
        self._progress_path = progress_path
        self._clock = clock
        self._put = put
        self._poll_interval_s = poll_interval_s
        self._idle_poll_s = idle_poll_s
        self._failure_backoff_s = failure_backoff_s
        self._persist_interval_s = persist_interval_s
        self._stop_grace_s = stop_grace_s
        self._batch_size = batch_size
        self._offsets: dict[int, int] = dict.fromkeys(range(1, len(self._levels_ms) + 1), 0)
        self._offsets.update(self._load())
        self._persisted: dict[int, int] | None = None
        self._events = {level: asyncio.Event() for level in self.levels}
        self._passes = dict.fromkeys(self.levels, 0)
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- levels ---------------------------------------------------------------

    @property
    def levels(self) -> range:
        """The configured levels, 1..max_level."""
        return range(1, len(self._levels_ms) + 1)

    @property
    def max_level(self) -> int:
        return len(self._levels_ms)

    def delay_ms(self, level: int) -> int:
        """The delay of a level (clamped like `schedule`)."""
        return self._levels_ms[self.clamp_level(level) - 1]

    def clamp_level(self, level: int) -> int:
        return min(max(level, 1), self.max_level)

    # -- parking ----------------------------------------------------------------

    def schedule(self, message: MessageToStore, level: int) -> MessageToStore:
        """Park a message: topic -> SCHEDULE_TOPIC_XXXX, queue -> level-1 (level
        clamped to 1..len(levels)), properties += REAL_TOPIC/REAL_QID and DELAY
        set to the clamped level, tags_code None (the store computes the
        delivery time). Pure: returns a new message.

        Whether to park is the caller's decision: Java parks a message whose
        DELAY is > 0 unless it is a prepared transaction half."""
        if message.topic == SCHEDULE_TOPIC:
            raise ValueError("the message is already parked")
        clamped = self.clamp_level(level)
        properties = edit_properties(
            message.properties,
            {
                props.REAL_TOPIC: message.topic,
                props.REAL_QID: str(message.queue_id),
                props.DELAY: str(clamped),
            },
        )
        return dataclasses.replace(
            message,
            topic=SCHEDULE_TOPIC,
            queue_id=clamped - 1,
            properties=properties,
            tags_code=None,
        )

    def notify_parked(self, level: int | None = None) -> None:
        """Make `level` (every level when None) look at its queue now: call after
        parking a message, or after moving a manual clock. Thread-safe."""
        loop = self._loop
        if loop is not None and loop.is_running() and not _in_loop(loop):
            loop.call_soon_threadsafe(self._set_events, level)
        else:
            self._set_events(level)

    def on_arrival(self, request: DispatchRequest) -> None:
        """An `ArrivalListener`: `store.add_arrival_listener(scheduler.on_arrival)`
        wakes a level whenever a message is parked in it."""
        if request.topic == SCHEDULE_TOPIC:
            self.notify_parked(request.queue_id + 1)

    def _set_events(self, level: int | None) -> None:
        if level is None:
            for event in self._events.values():
                event.set()
        else:
            self._events[self.clamp_level(level)].set()

    def passes(self, level: int) -> int:
        """How many delivery passes `level` has finished (observability, tests)."""
        return self._passes[level]

    # -- lifecycle ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    async def start(self) -> None:
        """Start one delivery task per level and the periodic persist task."""
        if self._tasks:
            return
        self._loop = asyncio.get_running_loop()
        # asyncio events bind to the first loop that waits on them: fresh ones per start.
        self._events = {level: asyncio.Event() for level in self.levels}
        self._correct_offsets()
        for level in self.levels:
            self._tasks.append(
                asyncio.create_task(self._run_level(level), name=f"delay-level-{level}")
            )
        self._tasks.append(asyncio.create_task(self._persist_loop(), name="delay-persist"))

    async def stop(self) -> None:
        """Cancel and await the tasks (a put in flight may finish, up to
        `stop_grace_s`), then persist the progress. A scheduler never started
        (a slave's: its master delivers, and the slave keeps a copy of the
        master's progress in the same file) writes nothing: its offsets are
        the ones read at start-up, older than that copy."""
        if self._loop is None and not self._tasks:
            return
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for task, result in zip(tasks, results, strict=True):
            if isinstance(result, Exception):
                log.error("%s ended with %r", task.get_name(), result)
        self._loop = None
        self.persist()

    # -- progress -----------------------------------------------------------------

    def progress(self) -> dict[int, int]:
        """Level -> queue offset of the next message to deliver (a copy)."""
        return dict(self._offsets)

    def encode(self) -> str:
        """The progress as delayOffset.json holds it (ScheduleMessageService.encode):
        what GET_ALL_DELAY_OFFSET answers, and what a slave copies."""
        return _encode_progress(self._offsets)

    def persist(self) -> None:
        """Write the progress file atomically (temporary file, fsync, rename)."""
        snapshot = dict(self._offsets)
        write_atomically(self._progress_path, _encode_progress(snapshot).encode())
        self._persisted = snapshot

    def _load(self) -> dict[int, int]:
        path = self._progress_path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            table = json.loads(text)["offsetTable"]
            if not isinstance(table, dict):
                raise TypeError("offsetTable is not an object")
            offsets = {int(level): int(offset) for level, offset in table.items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: unreadable delay progress: {exc}") from None
        if any(offset < 0 for offset in offsets.values()):
            raise ValueError(f"{path}: negative delay progress offset")
        return offsets

    def _correct_offsets(self) -> None:
        """Bring every level's progress inside its queue before anything new is
        parked (Java's correctDelayOffset): below the min -> the min, beyond the
        end -> the end (0 for an empty or missing queue)."""
        for level in self.levels:
            offset = self._offsets[level]
            entries, next_offset = self._scan(level, offset)
            if not entries and next_offset != offset:
                self._set_offset(level, next_offset)

    def _set_offset(self, level: int, offset: int) -> None:
        self._offsets[level] = offset

    async def _persist_loop(self) -> None:
        episode = FailureEpisode(log, "persisting the delay progress")
        while True:
            await asyncio.sleep(self._persist_interval_s)
            if self._offsets == self._persisted:
                continue
            try:
                self.persist()
            except OSError:
                episode.failed()
                continue
            episode.succeeded()

    # -- delivery -----------------------------------------------------------------

    async def _run_level(self, level: int) -> None:
        event = self._events[level]
        while True:
            event.clear()
            try:
                wait_s, wakeable = await self._deliver_due(level)
            except Exception:  # a level must never die
                log.exception("delay level %d: delivery pass failed", level)
                wait_s, wakeable = self._failure_backoff_s, False
            self._passes[level] += 1
            if not wakeable:
                await asyncio.sleep(wait_s)
                continue
            try:
                async with asyncio.timeout(wait_s):
                    await event.wait()
            except TimeoutError:
                pass

    async def _deliver_due(self, level: int) -> tuple[float, bool]:
        """Deliver what is due at the head of `level`'s queue. Returns how long
        to wait next, and whether `notify_parked` may cut the wait short."""
        delay_ms = self._levels_ms[level - 1]
        while True:
            offset = self._offsets[level]
            entries, next_offset = self._scan(level, offset)
            if not entries:
                if next_offset != offset:
                    self._set_offset(level, next_offset)
                    continue
                return self._idle_poll_s, True  # a parked message wakes it (on_arrival)
            for queue_offset, physical, deliver_at in entries:
                now = self._clock.now_ms()
                if deliver_at > now + delay_ms:  # the clock went back: due now
                    deliver_at = now
                if deliver_at > now:
                    self._set_offset(level, queue_offset)
                    return min(self._poll_interval_s, (deliver_at - now) / 1000), True
                if not await self._deliver(level, queue_offset, physical):
                    return self._failure_backoff_s, False

    def _scan(self, level: int, offset: int) -> tuple[list[tuple[int, int, int]], int]:
        """(queue offset, physical offset, delivery time) of the next entries of
        `level` from `offset`, and where the level's progress should be when
        there are none. Holds no record views after it returns."""
        probe = _TagsCodeProbe()
        result = self._store.get_messages(
            SCHEDULE_GROUP, SCHEDULE_TOPIC, level - 1, offset, self._batch_size, probe
        )
        status = result.status
        if status is GetStatus.FOUND:
            codes = probe.codes
            if len(codes) < len(result.buffers):  # a store that does not show tag slots
                delay = self._levels_ms[level - 1]
                codes = [peek_header(buf).store_timestamp + delay for buf in result.buffers]
            count = len(result.buffers)
            entries = list(
                zip(result.queue_offsets, result.physical_offsets, codes[:count], strict=True)
            )
            return entries, offset
        if status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            log.warning(
                "delay level %d: progress %d outside the queue [%d, %d], moved to %d",
                level,
                offset,
                result.min_offset,
                result.max_offset,
                result.next_begin_offset,
            )
            return [], result.next_begin_offset
        if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
            return [], max(offset, result.next_begin_offset)
        if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE) and offset:
            # The queue is empty or gone while the progress says otherwise (the
            # store was replaced): its next messages start at 0.
            log.warning("delay level %d: queue empty, progress %d reset to 0", level, offset)
            return [], 0
        return [], offset

    async def _deliver(self, level: int, queue_offset: int, physical: int) -> bool:
        """Re-store one due message; True when the level may move past it."""
        message = self._restore(level, queue_offset, physical)
        if message is None:
            self._set_offset(level, queue_offset + 1)
            return True
        put_task = asyncio.ensure_future(self._put(message))
        put_task.add_done_callback(_retrieve_exception)
        try:
            result = await asyncio.shield(put_task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is None or not current.cancelling():
                # the put itself was cancelled, not this level: a failed put
                log.error(
                    "delay level %d: re-storing offset %d was cancelled, retry in %.1f s",
                    level,
                    queue_offset,
                    self._failure_backoff_s,
                )
                return False
            # stop(): let the put finish so the progress matches the store and a
            # restart does not deliver this message twice.
            done, _ = await asyncio.wait({put_task}, timeout=self._stop_grace_s)
            if (
                put_task in done
                and not put_task.cancelled()
                and put_task.exception() is None
                and put_task.result().status in STORED_STATUSES
            ):
                self._set_offset(level, queue_offset + 1)
            elif put_task not in done:
                log.warning(
                    "delay level %d: stopped while storing offset %d; it may be delivered twice",
                    level,
                    queue_offset,
                )
            raise
        except Exception:
            log.exception(
                "delay level %d: re-storing offset %d failed, retry in %.1f s",
                level,
                queue_offset,
                self._failure_backoff_s,
            )
            return False
        if result.status not in STORED_STATUSES:
            log.error(
                "delay level %d: re-storing offset %d into %s/%d failed (%s %s), retry in %.1f s",
                level,
                queue_offset,
                message.topic,
                message.queue_id,
                result.status.value,
                result.remark,
                self._failure_backoff_s,
            )
            return False
        if result.status is not PutStatus.PUT_OK:
            log.warning(
                "delay level %d: offset %d stored with %s", level, queue_offset, result.status.value
            )
        self._set_offset(level, queue_offset + 1)
        return True

    def _restore(self, level: int, queue_offset: int, physical: int) -> MessageToStore | None:
        """The message to re-store for a parked entry, None (logged) when it
        cannot be delivered at all."""
        buf = self._store.read_by_physical_offset(physical)
        if buf is None:
            log.error(
                "delay level %d: record of offset %d (commitlog %d) is gone; skipped",
                level,
                queue_offset,
                physical,
            )
            return None
        try:
            record, _ = decode_record(buf)
            _, raw_properties = peek_topic_and_properties(buf)
            return delivery_message(record, raw_properties)
        except ValueError as exc:  # ProtocolError included
            log.error(
                "delay level %d: offset %d (commitlog %d) cannot be delivered, dropped: %s",
                level,
                queue_offset,
                physical,
                exc,
            )
            return None


def _encode_progress(offsets: dict[int, int]) -> str:
    return json.dumps({"offsetTable": {str(k): v for k, v in sorted(offsets.items())}})
