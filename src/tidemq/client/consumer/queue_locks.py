"""Broker queue locks of an orderly push consumer (Java ``RebalanceImpl.lock*``).

In clustering mode an orderly consumer may only pull and consume a queue
while it holds that queue's lock on the queue's master broker
(LOCK_BATCH_MQ, 41), so two consumers never consume one queue at once even
while their rebalances disagree for a moment. The broker keeps a lock 60 s
after its last renewal; this service renews every assigned queue every 20 s
(:meth:`QueueLockService.lock_all`, batched per broker) and the client side
trusts a lock for 30 s (:meth:`ProcessQueue.is_lock_expired`), so a consumer
that lost contact stops consuming before the broker hands the queue on.

Bodies (Java ``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` /
``LockBatchResponseBody``)::

    {"consumerGroup": G, "clientId": C, "onlyThisBroker": false,
     "mqSet": [{"topic": T, "brokerName": B, "queueId": 0}, ...]}
    answer of a lock: {"lockOKMQSet": [{"topic", "brokerName", "queueId"}, ...]}

``onlyThisBroker`` is a RocketMQ 5 field; 4.x brokers ignore it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from tidemq.client._core.process_queue import ProcessQueue
from tidemq.client._wire import loads_lenient
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common.clock import Clock
from tidemq.common.message import MessageQueue
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode

__all__ = [
    "LOCK_RENEW_INTERVAL_S",
    "QueueLockService",
    "decode_locked_queues",
    "encode_lock_body",
]

log = logging.getLogger(__name__)

LOCK_RENEW_INTERVAL_S = 20.0
"""Java ``lockMQPeriodically``: every assigned queue is re-locked every 20 s."""
LOCK_FIRST_RENEW_DELAY_S = 1.0
"""Java schedules the first renewal 1 s after start."""


def encode_lock_body(group: str, client_id: str, queues: Iterable[MessageQueue]) -> bytes:
    """The LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request body (queues sorted, no duplicates)."""
    document = {
        "consumerGroup": group,
        "clientId": client_id,
        "onlyThisBroker": False,
        "mqSet": [
            {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}
            for mq in sorted(set(queues))
        ],
    }
    return json.dumps(document, separators=(",", ":")).encode()


def decode_locked_queues(body: bytes) -> set[MessageQueue]:
    """The queues of a LOCK_BATCH_MQ answer (``lockOKMQSet``); ValueError when malformed."""
    document: Any = loads_lenient(body) if body else {}
    if not isinstance(document, dict):
        raise ValueError("lock answer is not a JSON object")
    raw_set = document.get("lockOKMQSet")
    if raw_set is None:
        return set()
    if not isinstance(raw_set, list):
        raise ValueError("lockOKMQSet is not a list")
    locked: set[MessageQueue] = set()
    for raw in raw_set:
        try:
            locked.add(MessageQueue(str(raw["topic"]), str(raw["brokerName"]), int(raw["queueId"])))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"malformed lockOKMQSet entry {raw!r}") from None
    return locked


class QueueLockService:
    """Locks, renews and releases the broker locks of one consumer's queues.

    ``process_queues`` is the rebalancer's live table (read, never changed):
    :meth:`lock_all` renews exactly the queues assigned at that moment. Lock
    outcomes are written to the ProcessQueues (``mark_locked`` /
    ``mark_unlocked``), which the pull service and the orderly consume
    service read. Failures are logged, never raised: a queue whose lock
    cannot be confirmed simply is not consumed until a later attempt works.
    """

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        process_queues: Mapping[MessageQueue, ProcessQueue],
        clock: Clock | None = None,
        *,
        renew_interval_s: float = LOCK_RENEW_INTERVAL_S,
        timeout_s: float | None = None,
    ) -> None:
        if renew_interval_s <= 0:
            raise ValueError("renew_interval_s must be positive")
        self._instance = instance
        self._group = group
        self._process_queues = process_queues
        self._clock = clock or instance.clock
        self._renew_interval_s = renew_interval_s
        self._timeout_s = timeout_s
        self._renewer: asyncio.Task[None] | None = None
        self.last_renewal_at: float | None = None
        """Monotonic time (``clock``) when :meth:`lock_all` last finished."""

    # -- one queue -----------------------------------------------------------------

    async def lock(self, mq: MessageQueue) -> bool:
        """Lock (or renew) one queue on its master; True when the broker granted it.

        Every granted queue's ProcessQueue is marked locked. A refused lock
        leaves the ProcessQueue as it was (Java's ``lock``); an unreachable
        broker gives False.
        """
        try:
            locked = await self._lock_batch(mq.broker_name, [mq])
        except ClientError as exc:
            log.warning("%s: lock of %s failed: %s", self._group, _name(mq), exc)
            return False
        self._mark(locked, granted=True)
        if mq not in locked:
            log.info("%s: lock of %s refused (held by another consumer)", self._group, _name(mq))
        return mq in locked

    async def unlock(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        """Release one queue's lock (the broker ignores it unless we hold it)."""
        pq = self._process_queues.get(mq)
        if pq is not None:
            pq.mark_unlocked()
        try:
            await self._unlock_batch(mq.broker_name, [mq], oneway=oneway)
        except ClientError as exc:
            log.warning("%s: unlock of %s failed: %s", self._group, _name(mq), exc)

    # -- every assigned queue -------------------------------------------------------

    async def lock_all(self) -> None:
        """Renew the lock of every assigned queue, one request per broker.

        Granted queues are marked locked (renewing their client-side life);
        queues a broker did not grant are marked unlocked. A broker that
        cannot be reached changes nothing: its queues keep their state until
        their client-side lock life runs out.
        """
        by_broker = _by_broker(self._process_queues)
        await asyncio.gather(
            *(self._lock_broker(broker, mqs) for broker, mqs in sorted(by_broker.items()))
        )
        self.last_renewal_at = self._clock.monotonic()

    async def _lock_broker(self, broker_name: str, mqs: list[MessageQueue]) -> None:
        try:
            locked = await self._lock_batch(broker_name, mqs)
        except ClientError as exc:
            log.warning("%s: lock renewal on %s failed: %s", self._group, broker_name, exc)
            return
        self._mark(locked, granted=True)
        refused = [mq for mq in mqs if mq not in locked]
        for mq in refused:
            pq = self._process_queues.get(mq)
            if pq is not None and pq.locked:
                log.warning("%s: lock of %s lost", self._group, _name(mq))
        self._mark(refused, granted=False)

    async def unlock_all(self, *, oneway: bool = False) -> None:
        """Release every assigned queue (shutdown); ProcessQueues are marked unlocked."""
        by_broker = _by_broker(self._process_queues)
        for mqs in by_broker.values():
            self._mark(mqs, granted=False)

        async def unlock_broker(broker_name: str, mqs: list[MessageQueue]) -> None:
            try:
                await self._unlock_batch(broker_name, mqs, oneway=oneway)
            except ClientError as exc:
                log.warning("%s: unlock on %s failed: %s", self._group, broker_name, exc)

        await asyncio.gather(
            *(unlock_broker(broker, mqs) for broker, mqs in sorted(by_broker.items()))
        )

    # -- renewal loop ----------------------------------------------------------------

    def start(self) -> None:
        """Start renewing every ``renew_interval_s`` (an instance-owned task)."""
        if self._renewer is None or self._renewer.done():
            self._renewer = self._instance.spawn(self._renew_forever())

    async def stop(self) -> None:
        """Stop renewing (locks are kept; call :meth:`unlock_all` to release them)."""
        task, self._renewer = self._renewer, None
        if task is None or task.done():
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    async def _renew_forever(self) -> None:
        await asyncio.sleep(min(LOCK_FIRST_RENEW_DELAY_S, self._renew_interval_s))
        while True:
            try:
                await self.lock_all()
            except Exception:  # keep renewing whatever one round did
                log.exception("%s: lock renewal failed", self._group)
            await asyncio.sleep(self._renew_interval_s)

    # -- wire ------------------------------------------------------------------------

    async def _lock_batch(
        self, broker_name: str, mqs: Collection[MessageQueue]
    ) -> set[MessageQueue]:
        response = await self._request(RequestCode.LOCK_BATCH_MQ, broker_name, mqs)
        assert response is not None
        try:
            return decode_locked_queues(response.body)
        except ValueError as exc:
            raise ClientError(
                f"malformed lock answer from {broker_name}: {exc}", ResponseCode.SYSTEM_ERROR
            ) from None

    async def _unlock_batch(
        self, broker_name: str, mqs: Collection[MessageQueue], *, oneway: bool
    ) -> None:
        await self._request(RequestCode.UNLOCK_BATCH_MQ, broker_name, mqs, oneway=oneway)

    async def _request(
        self, code: int, broker_name: str, mqs: Collection[MessageQueue], *, oneway: bool = False
    ) -> RemotingCommand | None:
        """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ of `mqs` to `broker_name`'s master: its
        answer (None when `oneway`); ClientError when the broker refuses."""
        address = await self._instance.require_master(broker_name, _any_topic(mqs))
        body = encode_lock_body(self._group, self._instance.client_id, mqs)
        if oneway:
            await self._instance.invoke_oneway(address, code, None, body)
            return None
        response = await self._instance.invoke(address, code, None, body, timeout=self._timeout_s)
        if response.code != ResponseCode.SUCCESS:
            what = "lock" if code == RequestCode.LOCK_BATCH_MQ else "unlock"
            raise ClientError(
                response.remark or f"{what} refused by {broker_name} (code {response.code})",
                response.code,
            )
        return response

    def _mark(self, mqs: Iterable[MessageQueue], *, granted: bool) -> None:
        for mq in mqs:
            pq = self._process_queues.get(mq)
            if pq is None:
                continue
            if granted:
                pq.mark_locked()
            else:
                pq.mark_unlocked()


def _by_broker(
    process_queues: Mapping[MessageQueue, ProcessQueue],
) -> dict[str, list[MessageQueue]]:
    """A snapshot of the assigned queues grouped by broker name (sorted)."""
    grouped: dict[str, list[MessageQueue]] = defaultdict(list)
    for mq in sorted(process_queues):
        grouped[mq.broker_name].append(mq)
    return dict(grouped)


def _any_topic(mqs: Collection[MessageQueue]) -> str | None:
    return next(iter(sorted(mqs)), MessageQueue("", "", 0)).topic or None


def _name(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}#{mq.queue_id}"
