"""Automatic batching of single sends: RocketMQ 5's `autoBatch` (ProduceAccumulator).

A single send costs a request and an answer on each side however small the
message; with `auto_batch=True` the producer holds single sends of the same
topic, tags, WAIT setting (and queue, when one is chosen) for up to
`batch_max_delay_ms`, or until they pass `batch_max_bytes`, and sends them as
one SEND_BATCH_MESSAGE. Each caller still gets its own SendResult: the batch's
answer is split the way Java's `MessageAccumulation.splitSendResults` splits it
(the i-th unique id and broker id, the first queue offset plus i).

Java's rules, kept here: delay and timer messages, retry-topic messages and
messages carrying a producer group are never held (`DefaultMQProducer.canBatch`),
and when the bytes held across all batches reach `total_batch_max_bytes` a
send goes out on its own. Defaults and bounds are Java's (holdMs 10 ms,
holdSize 32 KiB up to 2 MiB, totalHoldSize 32 MiB).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from tidemq.client.model import SendResult
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageQueue
from tidemq.common.names import is_retry_topic
from tidemq.common.tasks import TaskSet

DEFAULT_BATCH_MAX_DELAY_MS = 10
DEFAULT_BATCH_MAX_BYTES = 32 * 1024
DEFAULT_TOTAL_BATCH_MAX_BYTES = 32 * 1024 * 1024

_NEVER_BATCHED = frozenset(
    {
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        props.START_DELIVER_TIME,
        props.PGROUP,
        props.TRAN_MSG,
    }
)
"""Properties that keep a message out of a batch (a timer or a transaction
half needs its own request; Java: canBatch, plus batches refusing halves)."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How long and how much the accumulator holds (Java's checks and messages)."""

    max_delay_ms: int = DEFAULT_BATCH_MAX_DELAY_MS
    max_bytes: int = DEFAULT_BATCH_MAX_BYTES
    total_max_bytes: int = DEFAULT_TOTAL_BATCH_MAX_BYTES

    def __post_init__(self) -> None:
        if not 0 < self.max_delay_ms <= 30_000:
            raise ValueError(
                f"batch_max_delay_ms expect between 1ms and 30s, but get {self.max_delay_ms}!"
            )
        if not 0 < self.max_bytes <= 2 * 1024 * 1024:
            raise ValueError(
                f"batch_max_bytes expect between 1B and 2MB, but get {self.max_bytes}!"
            )
        if self.total_max_bytes <= 0:
            raise ValueError(
                f"total_batch_max_bytes must bigger then 0, but get {self.total_max_bytes}!"
            )


def can_batch(message: Message) -> bool:
    """Whether a single send may be held for a batch (Java's canBatch, less the
    accumulator-full check, which `SendAccumulator.offer` makes)."""
    if not message.body or is_retry_topic(message.topic):
        return False
    properties = message.properties
    if properties.get(props.DELAY, "0") not in ("", "0"):
        return False
    return properties.keys().isdisjoint(_NEVER_BATCHED)


def split_result(result: SendResult, count: int) -> list[SendResult]:
    """One SendResult per message of a batch answered with `result`.

    Ids are comma-joined in a batch's answer; a broker storing the batch as one
    entry (Java's batch consume queue) answers one id, and then every message
    gets the batch's result, as in Java."""
    if "," not in result.msg_id:
        return [result] * count
    ids = result.msg_id.split(",")
    offset_ids = result.offset_msg_id.split(",")
    if len(ids) != count or len(offset_ids) != count:
        raise ValueError(
            f"the batch's answer names {len(ids)} ids and {len(offset_ids)} broker ids "
            f"for {count} messages"
        )
    first = result.queue_offset
    status, topic, broker, queue_id = (
        result.status,
        result.topic,
        result.broker_name,
        result.queue_id,
    )
    transaction, recall, region, trace_on = (
        result.transaction_id,
        result.recall_handle,
        result.region_id,
        result.trace_on,
    )
    return [  # positional, not dataclasses.replace: this runs once per message
        SendResult(
            status,
            ids[i],
            offset_ids[i],
            topic,
            broker,
            queue_id,
            first + i,
            transaction,
            recall,
            region,
            trace_on,
        )
        for i in range(count)
    ]


BatchKey = tuple[str, str | None, bool, MessageQueue | None]
"""(topic, tags, WAIT, chosen queue): Java's AggregateKey."""

SendBatch = Callable[[Sequence[Message], MessageQueue | None], Coroutine[Any, Any, SendResult]]


class _Held:
    """The messages held for one key, and the futures their senders wait on."""

    __slots__ = ("futures", "messages", "size", "timer")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.futures: list[asyncio.Future[SendResult]] = []
        self.size = 0
        self.timer: asyncio.TimerHandle | None = None


class SendAccumulator:
    """Holds single sends and sends them in batches through `send_batch`.

    Runs on the producer's event loop; the batch sends are tasks of the
    producer's TaskSet (owned, cancelled at shutdown)."""

    def __init__(self, send_batch: SendBatch, limits: BatchLimits, tasks: TaskSet) -> None:
        self._send_batch = send_batch
        self.limits = limits
        self._tasks = tasks
        self._held: dict[BatchKey, _Held] = {}
        self._held_bytes = 0
        """Bytes held or in flight in batches (Java's currentlyHoldSize)."""

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    def offer(
        self, message: Message, queue: MessageQueue | None
    ) -> asyncio.Future[SendResult] | None:
        """The future of `message`'s result once held, or None when it must be sent
        on its own (it cannot be batched, or the accumulator is full)."""
        if not can_batch(message) or self._held_bytes >= self.limits.total_max_bytes:
            return None
        key: BatchKey = (
            message.topic,
            message.properties.get(props.TAGS),
            message.wait_store_msg_ok,
            queue,
        )
        loop = asyncio.get_running_loop()
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held()
            held.timer = loop.call_later(self.limits.max_delay_ms / 1000, self._flush, key)
        future: asyncio.Future[SendResult] = loop.create_future()
        size = len(message.body)
        held.messages.append(message)
        held.futures.append(future)
        held.size += size
        self._held_bytes += size
        if held.size > self.limits.max_bytes:
            self._flush(key)
        return future

    def flush_all(self) -> None:
        """Send everything held now (at shutdown, before waiting for the sends)."""
        for key in list(self._held):
            self._flush(key)

    def _flush(self, key: BatchKey) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        if held.timer is not None:
            held.timer.cancel()
        self._tasks.spawn(self._send(held, key[3]))

    async def _send(self, held: _Held, queue: MessageQueue | None) -> None:
        try:
            result = await self._send_batch(held.messages, queue)
            results = split_result(result, len(held.messages))
        except asyncio.CancelledError:
            for future in held.futures:
                future.cancel()
            raise
        except Exception as exc:
            for future in held.futures:
                if not future.done():
                    future.set_exception(exc)
        else:
            for future, one in zip(held.futures, results, strict=True):
                if not future.done():
                    future.set_result(one)
        finally:
            self._held_bytes -= held.size
