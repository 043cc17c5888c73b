"""A blocking handle on a tidemq cluster for the data source's driver and
tasks: routes, queue offsets, ranged pulls, group offsets, sends and
END_TRANSACTION.

Spark calls the data source from plain threads in Python workers, so each
:class:`Connection` owns a private asyncio event loop and
runs tidemq's asyncio client on it; it is opened and closed within one
Spark call (``with Connection(...)``) and never shared between threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from tidemq.client.consumer.offset_store import BrokerOffsetStore
from tidemq.client.consumer.pull_api import PullResult, PullStatus, pull_raw
from tidemq.client.consumer.queue_offsets import max_offset, min_offset, search_offset
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import AsyncProducer
from tidemq.common import event_loop
from tidemq.common.message import MessageQueue
from tidemq.protocol import RequestCode, ResponseCode
from tidemq.spark.ledger import Half, HalfRun
from tidemq.spark.offsets import OffsetRange, Position

__all__ = ["READER_GROUP", "Connection", "DataLossError"]

T = TypeVar("T")

END_CHUNK = 2000
"""Halves per TIDEMQ_END_TRANSACTIONS request."""
END_TIMEOUT_S = 30.0
READER_GROUP = "TIDEMQ_SPARK_READER"
"""The group named in pulls when the query commits no group of its own."""


class DataLossError(RuntimeError):
    """Offsets the query must read are gone (retention removed them)."""


class Connection:
    """``with Connection(namesrv) as conn``: blocking calls over one private loop."""

    def __init__(self, namesrv: str, *, request_timeout_s: float = 10.0) -> None:
        self._loop = event_loop.new_event_loop()
        self._config = ClientConfig(namesrv=namesrv, request_timeout_s=request_timeout_s)
        self._instance: ClientInstance | None = None
        self._producers: dict[str, AsyncProducer] = {}

    def __enter__(self) -> Self:
        self._instance = ClientInstance(self._config)
        self.run(self._instance.start())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            for producer in self._producers.values():
                self.run(producer.shutdown())
            if self._instance is not None:
                self.run(self._instance.close())
        finally:
            self._producers.clear()
            self._instance = None
            self._loop.close()

    def run(self, coro: Awaitable[T]) -> T:
        """Run `coro` on the private loop (not asyncio.Runner.run: that installs a
        SIGINT handler per call and is far slower for many small calls)."""
        return self._loop.run_until_complete(coro)

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise RuntimeError("use the connection inside its with block")
        return self._instance

    # -- queues and offsets ---------------------------------------------------------

    def read_queues(self, topics: Iterable[str]) -> list[MessageQueue]:
        """Every readable queue of `topics` on a live master, sorted."""

        async def fetch() -> list[MessageQueue]:
            queues: list[MessageQueue] = []
            for topic in topics:
                route = await self.instance.route(topic, refresh=True)
                masters = route.masters()
                queues += [q for q in route.read_queues() if q.broker_name in masters]
            return sorted(queues)

        return self.run(fetch())

    def max_offsets(self, queues: Iterable[MessageQueue]) -> Position:
        return self.run(self._each(queues, max_offset))

    def min_offsets(self, queues: Iterable[MessageQueue]) -> Position:
        return self.run(self._each(queues, min_offset))

    def offsets_at(self, queues: Iterable[MessageQueue], timestamp_ms: int) -> Position:
        """The first offset stored at or after `timestamp_ms` in each queue."""

        async def at(instance: ClientInstance, mq: MessageQueue) -> int:
            return await search_offset(instance, mq, timestamp_ms)

        return self.run(self._each(queues, at))

    async def _each(self, queues: Iterable[MessageQueue], ask: Any) -> Position:
        wanted = list(queues)
        answers = await asyncio.gather(*(ask(self.instance, mq) for mq in wanted))
        return dict(zip(wanted, answers, strict=True))

    # -- reading ----------------------------------------------------------------------

    def pull_range(
        self,
        part: OffsetRange,
        expression: tuple[str, str],
        *,
        batch: int,
        fail_on_data_loss: bool,
        group: str = READER_GROUP,
    ) -> Iterator[bytes]:
        """The records of `part`, a pull at a time, in offset order: each pull
        answer's body, records laid back to back (see `record.codec`).
        The next pull is sent before an answer is handed out, so the broker
        works on it while the caller decodes.

        The broker applies the filter (TAG by hash, SQL92 exactly); records
        outside the range and the exact tag check are the caller's
        (`columns.records_to_batch`). Offsets below the queue's minimum
        (removed by retention) raise DataLossError, or are skipped when
        `fail_on_data_loss` is false; so is a range end past what the queue
        still holds."""
        text, kind = expression
        subscription = SubscriptionSpec.parse(part.queue.topic, text, kind, sub_version=0)
        where = f"{part.queue.topic} {part.queue.broker_name}:{part.queue.queue_id}"

        def pull(offset: int) -> asyncio.Task[tuple[PullResult, bytes]]:
            task = self._loop.create_task(
                pull_raw(
                    self.instance,
                    group=group,
                    mq=part.queue,
                    subscription=subscription,
                    offset=offset,
                    max_nums=min(batch, part.end - offset),
                    suspend_ms=0,
                )
            )
            self.run(asyncio.sleep(0))  # let it send its request before the caller works
            return task

        offset = part.start
        pending = pull(offset)
        try:
            while True:
                result, raw = self.run(pending)
                if offset < result.min_offset or result.status is PullStatus.OFFSET_ILLEGAL:
                    if result.min_offset > offset:
                        reason = (
                            f"offsets {offset}..{min(result.min_offset, part.end) - 1} of "
                            f"{where} are gone (the queue now starts at {result.min_offset})"
                        )
                    else:
                        reason = f"offset {offset} of {where} is past its end ({result.max_offset})"
                    if fail_on_data_loss:
                        raise DataLossError(
                            f"{reason}; set failOnDataLoss=false to skip what was lost"
                        )
                    if result.min_offset <= offset or result.min_offset >= part.end:
                        return
                    offset = result.min_offset
                    pending = pull(offset)
                    continue
                if result.status is PullStatus.NO_NEW_MSG:
                    if fail_on_data_loss:
                        raise DataLossError(
                            f"{where} ends at {result.max_offset}, before the planned end "
                            f"{part.end}; set failOnDataLoss=false to skip"
                        )
                    return
                if result.next_begin_offset <= offset:
                    raise ClientError(
                        f"the broker did not move past offset {offset} of {where}",
                        ResponseCode.SYSTEM_ERROR,
                    )
                offset = result.next_begin_offset
                if offset < part.end:  # the next answer travels while the caller decodes
                    pending = pull(offset)
                if raw:
                    yield raw
                if offset >= part.end:
                    return
        finally:
            if not pending.done():
                pending.cancel()
                self.run(asyncio.gather(pending, return_exceptions=True))

    # -- group offsets ----------------------------------------------------------------

    def commit_group(self, group: str, position: Position) -> None:
        """Store `position` as `group`'s consumer offsets (awaited, so lag shows at once)."""

        async def commit() -> None:
            store = BrokerOffsetStore(self.instance, group)
            for mq, offset in position.items():
                store.update(mq, offset)
            await store.persist_all(list(position), oneway=False)

        self.run(commit())

    # -- writing ----------------------------------------------------------------------

    def producer(self, group: str, send_timeout_s: float) -> AsyncProducer:
        """A started producer of `group` sharing this connection's client instance."""
        producer = self._producers.get(group)
        if producer is None:
            producer = AsyncProducer(
                group,
                client_instance=self.instance,
                send_timeout_s=send_timeout_s,
                send_latency_fault_enable=False,
            )
            self.run(producer.start())
            self._producers[group] = producer
        return producer

    def end_transactions(self, group: str, halves: Iterable[Half], commit: bool) -> None:
        """`end_runs` for single halves (kept in their order)."""
        self.end_runs(group, HalfRun.of(halves), commit)

    def end_runs(self, group: str, runs: Sequence[HalfRun], commit: bool) -> None:
        """Commit or roll back every half of `runs`, answers awaited, END_CHUNK
        halves per TIDEMQ_END_TRANSACTIONS request (a tidemq extension): each
        request is one append on the broker, in the order given, so a message
        group's halves (whose lane order the runs keep) are committed in order.
        Brokers are ended concurrently, each one's chunks one after another.

        The broker skips a half resolved already, so ending a half twice is
        harmless: that is what makes a replayed commit safe."""

        async def end_on(broker: str, mine: list[HalfRun]) -> None:
            address = await self.instance.require_master(broker, mine[0].topic)
            for items in _items(mine, commit):
                response = await self.instance.invoke(
                    address,
                    RequestCode.TIDEMQ_END_TRANSACTIONS,
                    {"producerGroup": group},
                    body=('{"items":[' + ",".join(items) + "]}").encode(),
                    timeout=END_TIMEOUT_S,
                )
                if response.code != ResponseCode.SUCCESS:
                    raise ClientError(
                        f"ending {len(items)} transactions on {broker}: "
                        f"{response.remark or response.code}",
                        response.code,
                    )

        async def end_all() -> None:
            by_broker: dict[str, list[HalfRun]] = {}
            for run in runs:
                if len(run):
                    by_broker.setdefault(run.broker_name, []).append(run)
            await asyncio.gather(*(end_on(b, mine) for b, mine in by_broker.items()))

        if any(len(run) for run in runs):
            self.run(end_all())


def _items(runs: Sequence[HalfRun], commit: bool) -> Iterator[list[str]]:
    """The request items (JSON `[commitLogOffset,tranStateTableOffset,commit]`)
    of `runs`, END_CHUNK at a time."""
    flag = "true" if commit else "false"
    items: list[str] = []
    for run in runs:
        first = run.first_queue_offset
        for i, offset in enumerate(run.offsets()):
            items.append(f"[{offset},{first + i},{flag}]")
            if len(items) == END_CHUNK:
                yield items
                items = []
    if items:
        yield items
