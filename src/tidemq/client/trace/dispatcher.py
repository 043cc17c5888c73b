"""Trace records leave the client in batches, on a task of their own, so that
tracing never blocks or fails the send or the consumption it records
(Java's AsyncTraceDispatcher, apache/rocketmq client/.../trace/AsyncTraceDispatcher.java).

`append` puts one entry (the records of one send, one listener call, one
transaction end) in a bounded queue (2048, as Java) and returns at once, from
any thread: when the queue is full the entry is dropped and counted, and a
warning names the count once every `drop_log_every` drops. The worker task
wakes when `batch_size` entries wait (10, Java's traceMsgBatchNum; at most 20)
or `flush_interval_s` (5 s) after its last round, takes up to `batch_size`
entries at a time, groups them by traced topic and sends each group as one
trace message (several when the text passes 128,000 characters, Java's
maxMsgSize): the body is the records' text, the keys are every traced msgId
and message key, so a key query on the trace topic finds them. Sends run
concurrently, at most `max_in_flight` (64) at a time (Java sends them
asynchronously); a failed send is counted and logged, never raised. `shutdown`
sends what is queued, then stops.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from tidemq.client.trace.records import (
    DEFAULT_TRACE_TOPIC,
    TraceRecord,
    encode_records,
    record_keys,
)
from tidemq.common.message import Message
from tidemq.common.tasks import TaskSet

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CAPACITY",
    "MAX_BATCH_SIZE",
    "MAX_TRACE_BODY_CHARS",
    "TraceDispatcher",
    "TraceEntry",
    "TraceSend",
    "trace_messages",
]

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 10
"""ClientConfig.traceMsgBatchNum."""
MAX_BATCH_SIZE = 20
"""AsyncTraceDispatcher caps the batch at 20."""
DEFAULT_CAPACITY = 2048
"""AsyncTraceDispatcher's traceContextQueue."""
MAX_TRACE_BODY_CHARS = 128_000
"""AsyncTraceDispatcher's maxMsgSize: a trace message's text is cut after passing it."""
MAX_TRACE_KEYS_CHARS = 16_000
"""The KEYS of one trace message stay under this (the properties of a message are
limited; Java sets no bound): msgIds first, then message keys, the rest left out."""
DEFAULT_FLUSH_INTERVAL_S = 5.0
"""AsyncTraceDispatcher's flushTraceInterval."""
DEFAULT_MAX_IN_FLIGHT = 64
"""Trace sends at once. Java's are asynchronous sends (AsyncDataSendTask,
traceProducer.send with a callback), bounded only by the producer's async
semaphore; a small bound here would tie the trace rate to the broker's
latency, which is long exactly when the client sends the most."""
DEFAULT_DROP_LOG_EVERY = 1000
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
"""AsyncTraceDispatcher's WAIT_FOR_SHUTDOWN."""

TraceSend = Callable[[Message], Awaitable[object]]
"""Sends one trace message (a producer's `send`)."""


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """The records of one traced event; `topic` is the traced message's topic."""

    topic: str
    records: tuple[TraceRecord, ...]


def trace_messages(
    trace_topic: str,
    entries: Sequence[TraceEntry],
    max_body_chars: int = MAX_TRACE_BODY_CHARS,
) -> list[Message]:
    """The trace messages carrying `entries`: one per traced topic, cut after
    the text passes `max_body_chars` (AsyncTraceDispatcher.flushData)."""
    by_topic: dict[str, list[TraceEntry]] = {}
    for entry in entries:
        if entry.records:
            by_topic.setdefault(entry.topic, []).append(entry)
    messages: list[Message] = []
    for group in by_topic.values():
        texts: list[str] = []
        records: list[TraceRecord] = []
        size = 0
        for entry in group:
            text = encode_records(entry.records)
            texts.append(text)
            records.extend(entry.records)
            size += len(text)
            if size >= max_body_chars:
                messages.append(_message(trace_topic, texts, records))
                texts, records, size = [], [], 0
        if texts:
            messages.append(_message(trace_topic, texts, records))
    return messages


def _message(trace_topic: str, texts: list[str], records: Iterable[TraceRecord]) -> Message:
    message = Message(trace_topic, "".join(texts).encode("utf-8"))
    ids: dict[str, None] = {}
    others: dict[str, None] = {}
    for record in records:
        first, *rest = record_keys(record)
        ids[first] = None
        others.update(dict.fromkeys(rest))
    kept: list[str] = []
    length = 0
    for key in [*ids, *(k for k in others if k not in ids)]:
        if length + len(key) + 1 > MAX_TRACE_KEYS_CHARS:
            break
        kept.append(key)
        length += len(key) + 1
    message.keys = kept
    return message


class TraceDispatcher:
    """Batches trace entries and sends them in the background (see the module docstring).

    `send` sends one trace message; `on_close`, if given, is awaited at the end
    of `shutdown` (it shuts the trace producer down)."""

    def __init__(
        self,
        send: TraceSend,
        trace_topic: str = DEFAULT_TRACE_TOPIC,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        capacity: int = DEFAULT_CAPACITY,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_body_chars: int = MAX_TRACE_BODY_CHARS,
        drop_log_every: int = DEFAULT_DROP_LOG_EVERY,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if not trace_topic:
            raise ValueError("the trace topic must not be empty")
        if capacity < 1 or batch_size < 1 or max_in_flight < 1 or drop_log_every < 1:
            raise ValueError("capacity, batch_size, max_in_flight and drop_log_every must be >= 1")
        if flush_interval_s <= 0:
            raise ValueError("flush_interval_s must be positive")
        self.trace_topic = trace_topic
        self.batch_size = min(batch_size, MAX_BATCH_SIZE)
        self.capacity = capacity
        self.flush_interval_s = flush_interval_s
        self.max_body_chars = max_body_chars
        self.drop_log_every = drop_log_every
        self._send = send
        self._on_close = on_close
        self._queue: collections.deque[TraceEntry] = collections.deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self._worker = TaskSet(f"trace dispatcher {trace_topic}")
        self._sends = TaskSet(f"trace sends {trace_topic}")
        self._closed = False
        self.dropped = 0
        """Entries dropped because the queue was full."""
        self.sent = 0
        """Trace messages the broker took."""
        self.failed = 0
        """Trace messages whose send failed (their records are lost)."""

    @property
    def queued(self) -> int:
        return len(self._queue)

    # -- producing side (any thread) ------------------------------------------------------

    def append(self, entry: TraceEntry) -> bool:
        """Queue `entry` for sending; False (and counted in `dropped`) when the
        queue is full or the dispatcher is shut down. Never blocks."""
        with self._lock:
            if self._closed:
                return False
            if len(self._queue) >= self.capacity:
                self.dropped += 1
                dropped = self.dropped
                full = True
            else:
                self._queue.append(entry)
                full = False
                ready = len(self._queue) == self.batch_size
        if full:
            if dropped % self.drop_log_every == 1 or self.drop_log_every == 1:
                log.warning(
                    "trace queue for %s full (%d entries): %d trace entries dropped so far",
                    self.trace_topic,
                    self.capacity,
                    dropped,
                )
            return False
        if ready:
            self._wake_worker()
        return True

    def _wake_worker(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return  # not started: the first round takes what is queued
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(wake.set)

    # -- the worker (the loop) ------------------------------------------------------------

    def start(self) -> None:
        """Start the worker on the running loop (idempotent)."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._worker.spawn(self._run())

    async def _run(self) -> None:
        assert self._wake is not None
        wake = self._wake
        while True:
            if not self._closed and len(self._queue) < self.batch_size:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.flush_interval_s):
                        await wake.wait()
            wake.clear()
            await self._send_queued()
            if self._closed:
                return

    def _take(self) -> list[TraceEntry]:
        with self._lock:
            count = min(self.batch_size, len(self._queue))
            return [self._queue.popleft() for _ in range(count)]

    async def _send_queued(self) -> None:
        """Start sends for everything queued now, `batch_size` entries a round."""
        while True:
            entries = self._take()
            if not entries:
                return
            for message in trace_messages(self.trace_topic, entries, self.max_body_chars):
                await self._slots.acquire()  # at most max_in_flight sends at once
                self._sends.spawn(self._send_one(message))

    async def _send_one(self, message: Message) -> None:
        try:
            await self._send(message)
        except Exception as exc:
            self.failed += 1
            if self.failed % self.drop_log_every == 1 or self.drop_log_every == 1:
                log.warning(
                    "sending a trace message to %s failed (%d so far; their records are lost): %s",
                    self.trace_topic,
                    self.failed,
                    exc,
                )
        else:
            self.sent += 1
        finally:
            self._slots.release()

    async def flush(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> bool:
        """Send everything queued now and wait for the sends (up to `timeout_s`);
        False if some were still running."""
        await self._send_queued()
        return await self._sends.wait(timeout_s)

    async def shutdown(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> None:
        """Refuse new entries, send what is queued and wait for the sends (up
        to `timeout_s` in all), then close the trace producer (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                deadline = loop.time() + timeout_s
                wake.set()  # the worker's last round: everything queued, then it ends
                done = await self._worker.wait(timeout_s)
                done = await self._sends.wait(deadline - loop.time()) and done
                if not done:
                    log.warning(
                        "trace sends to %s still running after %.1f s at shutdown are cancelled",
                        self.trace_topic,
                        timeout_s,
                    )
                await self._worker.cancel_all()
                await self._sends.cancel_all()
            if self._queue:
                log.warning(
                    "%d trace entries for %s were not sent before shutdown",
                    len(self._queue),
                    self.trace_topic,
                )
                self._queue.clear()
        finally:
            if self._on_close is not None:
                await self._on_close()
