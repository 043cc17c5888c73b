"""End-to-end throughput and latency: one `tidemq serve` process, one client process.

    .venv/bin/python benchmarks/e2e_bench.py [--scenario NAME ...] [--repeat N] [--json] [--raw]

Scenarios (issue #4 targets in brackets), 1 KiB bodies with TAGS and a fresh
UNIQ_KEY per message, a topic of 8 queues, the server with async flush unless
named otherwise:

- produce-batch: `AsyncProducer.send_batch`, 32 messages per request, 8
  requests in flight [>= 200,000 msgs/s]
- send-async: `AsyncProducer.send_async`, one message each, 256 in flight
  [>= 50,000 msgs/s]
- send-async-autobatch: the same with `AsyncProducer(auto_batch=True)`
  (RocketMQ 5's autoBatch, defaults 10 ms / 32 KiB): the sends in flight
  travel as batches
- produce-batch-sync: produce-batch against a server with `--flush sync`
  [>= 100,000 msgs/s]
- consume: a prefilled topic consumed by an `AsyncPushConsumer` (clustering,
  async listener, consumeMessageBatchMaxSize 32, pull batch 32) from the
  first offset until every message reached the listener [>= 250,000 msgs/s]
- lite-pull: the same prefilled topic read by the blocking `LitePullConsumer`
  (subscribe, clustering, auto commit, pull batch `--pull-batch-size`, 32 by
  default) with `poll()` calls from an application thread, as a user's loop
  would, until every message was returned [>= 250,000 msgs/s, Redis Streams'
  XREADGROUP + XACK in the peer harness]
- latency: `AsyncProducer.send` at 1,000 msgs/s; the time from just before the
  send until the push consumer's listener (batch size 1) sees the message, same
  process, wall clock [p50 <= 0.3 ms, p99 <= 0.5 ms]. Also printed: the
  producer's acknowledgement time and the round trip of a request the broker
  answers from memory (the floor on this machine at that moment).

`--raw` drives the broker with the bare remoting client instead (protocol
headers, batch codec, PULL_MESSAGE loops, long polling for latency): the wire
work without the client library's bookkeeping, to tell broker costs from
client costs. Each scenario is bounded by a message count and a time limit;
every row also shows the CPU time per message of each process (comparable
even when other work shares the two cores) and its CPU share. `--repeat N`
runs every scenario N times (a fresh server each time) and reports the median.
`--profile-server DIR` runs the server under cProfile, one `.prof` per run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.admin import AdminClient
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.lite_pull import LitePullConsumer
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.producer import AsyncProducer
from tidemq.common import event_loop, sysflag
from tidemq.common import properties as props
from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.common.message import Message, MessageExt
from tidemq.common.message_id import UniqueIdGenerator
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeaderV2,
    encode_header,
)
from tidemq.record.codec import decode_records, encode_batch
from tidemq.testing import processes
from tidemq.transport import RemotingClient

BODY_SIZE = 1024
QUEUES = 8
BATCH = 32
BATCH_WINDOW = 8
SEND_WINDOW = 256
PULL_BATCH = 32
TIME_LIMIT_S = 60.0
PRODUCER_GROUP = "BenchProducer"
CONSUMER_GROUP = "BenchConsumer"
SEQ = struct.Struct(">Q")


@dataclass
class Result:
    scenario: str
    value: float
    unit: str
    target: str
    met: bool
    detail: dict[str, float] = field(default_factory=dict)


@dataclass
class Server:
    namesrv: str
    broker: str
    pid: int

    def cpu_seconds(self) -> float:
        """User + system CPU the server process used so far (Linux /proc)."""
        user, system = self.cpu_split()
        return user + system

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the server process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick


class Meter:
    """Wall time and the CPU share of the client and the server over one timed part."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.detail: dict[str, float] = {}

    def __enter__(self) -> Meter:
        self._wall = time.perf_counter()
        self._client = time.process_time()
        self._server_split = self.server.cpu_split()
        self._server = sum(self._server_split)
        self._client_split = os.times()
        return self

    def __exit__(self, *exc_info: object) -> None:
        wall = time.perf_counter() - self._wall
        self.detail["seconds"] = round(wall, 3)
        client = time.process_time() - self._client
        server = self.server.cpu_seconds() - self._server
        self.detail["client_cpu_pct"] = round(100 * client / wall)
        self.detail["server_cpu_pct"] = round(100 * server / wall)
        _user, system = self.server.cpu_split()
        self.detail["server_system_share_pct"] = round(
            100 * (system - self._server_split[1]) / max(server, 1e-9)
        )
        times = os.times()
        self.detail["client_system_share_pct"] = round(
            100 * (times.system - self._client_split.system) / max(client, 1e-9)
        )
        self.detail["client_cpu_s"] = round(client, 3)
        self.detail["server_cpu_s"] = round(server, 3)

    def per_message(self, messages: int) -> None:
        """CPU microseconds per message: comparable even when other work shares the CPUs."""
        self.detail["client_us_per_msg"] = round(1e6 * self.detail["client_cpu_s"] / messages, 1)
        self.detail["server_us_per_msg"] = round(1e6 * self.detail["server_cpu_s"] / messages, 1)


@contextmanager
def running_server(root: Path, flush: str, profile_dir: Path | None, name: str) -> Iterator[Server]:
    """A `tidemq serve` subprocess (optionally profiling itself) on free ports."""
    data_dir = root / name / "data"
    data_dir.mkdir(parents=True)
    args = processes.serve_args(data_dir, flush=flush)
    log = data_dir.parent / f"{name}.log"
    if profile_dir is None:
        process = processes.ServerProcess(args, data_dir.parent, log)
    else:
        profile_dir.mkdir(parents=True, exist_ok=True)
        with profiling_env(root / "profile-hook", profile_dir / f"{name}.prof"):
            process = processes.ServerProcess(args, data_dir.parent, log)
    try:
        process.wait_ready()
        yield Server(process.namesrv, process.broker, process.popen.pid)
        if profile_dir is not None:
            process.stop()  # SIGTERM: a clean exit writes the profile
    finally:
        process.kill()


PROFILE_HOOK = """\
import atexit, cProfile, os
_profile = cProfile.Profile()
_profile.enable()
atexit.register(_profile.dump_stats, os.environ["TIDEMQ_BENCH_PROFILE"])
"""


@contextmanager
def profiling_env(hook_dir: Path, out: Path) -> Iterator[None]:
    """While active, a Python started from here profiles its main thread into `out`:
    a `sitecustomize` on PYTHONPATH starts cProfile and dumps it at exit."""
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(PROFILE_HOOK)
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "TIDEMQ_BENCH_PROFILE")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), saved["PYTHONPATH"]]))
    os.environ["TIDEMQ_BENCH_PROFILE"] = str(out)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- the raw client -------------------------------------------------------------------


class RawClient:
    """Send and pull with the remoting client and the protocol codecs."""

    def __init__(self, server: Server, topic: str) -> None:
        self.server = server
        self.meter = Meter(server)
        self.topic = topic
        self.remoting = RemotingClient(name="bench")
        self.ids = UniqueIdGenerator(SYSTEM_CLOCK)
        self.body = bytearray(os.urandom(BODY_SIZE))

    async def setup(self) -> None:
        async with AdminClient(self.server.namesrv) as admin:
            await admin.create_topic(self.topic, queues=QUEUES)

    async def close(self) -> None:
        await self.remoting.close()

    def _body(self, seq: int) -> bytes:
        SEQ.pack_into(self.body, 0, seq)
        return bytes(self.body)

    def _send_header(self, queue_id: int, properties: str | None, batch: bool) -> dict[str, str]:
        header = SendMessageRequestHeaderV2(
            producer_group=PRODUCER_GROUP,
            topic=self.topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=SYSTEM_CLOCK.now_ms(),
            flag=0,
            properties=properties,
            batch=batch,
        )
        return encode_header(header)

    async def send_batch(self, queue_id: int, first_seq: int, count: int) -> None:
        messages = [
            Message(
                self.topic,
                self._body(seq),
                properties={props.TAGS: "TagA", props.UNIQ_KEY: self.ids.next_id()},
            )
            for seq in range(first_seq, first_seq + count)
        ]
        command = RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE,
            self._send_header(queue_id, None, True),
            encode_batch(messages),
        )
        response = await self.remoting.invoke(self.server.broker, command, 10.0)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"batch send failed: {response.code} {response.remark}")

    async def send_one(self, queue_id: int, seq: int) -> None:
        properties = props.encode_properties(
            {props.TAGS: "TagA", props.UNIQ_KEY: self.ids.next_id()}
        )
        command = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2,
            self._send_header(queue_id, properties, False),
            self._body(seq),
        )
        response = await self.remoting.invoke(self.server.broker, command, 10.0)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"send failed: {response.code} {response.remark}")

    async def pull(
        self, queue_id: int, offset: int, suspend_ms: int = 0
    ) -> tuple[int, bytes | None]:
        """(next offset, body or None when nothing is there yet)."""
        header = PullMessageRequestHeader(
            consumer_group=CONSUMER_GROUP,
            topic=self.topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=PULL_BATCH,
            sys_flag=sysflag.build_pull_sys_flag(
                commit_offset=False, suspend=suspend_ms > 0, subscription=True
            ),
            commit_offset=0,
            suspend_timeout_millis=suspend_ms,
            subscription="*",
            sub_version=0,
        )
        command = RemotingCommand.request(RequestCode.PULL_MESSAGE, encode_header(header))
        response = await self.remoting.invoke(self.server.broker, command, suspend_ms / 1000 + 10.0)
        next_offset = int(response.ext_fields.get("nextBeginOffset", offset))
        if response.code == ResponseCode.SUCCESS:
            return next_offset, response.body
        if response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            return next_offset, None
        raise RuntimeError(f"pull failed: {response.code} {response.remark}")


# -- the real client ------------------------------------------------------------------


class RealClient(RawClient):
    """The client library: AsyncProducer for sends, AsyncPushConsumer for consumption.

    Sends ignore `queue_id`: the producer picks queues round robin (with its
    fault tolerance), as an application's sends would; it adds the UNIQ_KEY.
    """

    def __init__(self, server: Server, topic: str, *, auto_batch: bool = False) -> None:
        super().__init__(server, topic)
        self.producer = AsyncProducer(PRODUCER_GROUP, server.namesrv, auto_batch=auto_batch)

    async def setup(self) -> None:
        await super().setup()
        await self.producer.start()

    async def close(self) -> None:
        await self.producer.shutdown()
        await super().close()

    def message(self, seq: int) -> Message:
        return Message(self.topic, self._body(seq), properties={props.TAGS: "TagA"})

    async def send_batch(self, queue_id: int, first_seq: int, count: int) -> None:
        messages = [self.message(seq) for seq in range(first_seq, first_seq + count)]
        await self.producer.send_batch(messages)

    async def send_one(self, queue_id: int, seq: int) -> None:
        await self.producer.send_async(self.message(seq))

    def consumer(
        self, listener: Callable[[list[MessageExt]], None], batch_max: int, group: str
    ) -> AsyncPushConsumer:
        async def consume(
            messages: list[MessageExt], _context: ConsumeConcurrentlyContext
        ) -> ConsumeStatus:
            listener(messages)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = AsyncPushConsumer(
            group,
            self.server.namesrv,
            listener=consume,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_message_batch_max_size=batch_max,
        )
        consumer.subscribe(self.topic, "*")
        return consumer


async def consume_push(client: RealClient, total: int, batch_max: int = 32) -> float:
    per_queue = total // QUEUES
    for first in range(0, per_queue * QUEUES, BATCH):  # prefill, not timed
        await client.send_batch(0, first, BATCH)
    expected = (per_queue * QUEUES) // BATCH * BATCH
    seen = 0
    done = asyncio.Event()

    def listener(messages: list[MessageExt]) -> None:
        nonlocal seen
        seen += len(messages)
        if seen >= expected:
            done.set()

    consumer = client.consumer(listener, batch_max, CONSUMER_GROUP)
    started = time.perf_counter()
    with client.meter:
        await consumer.start()
        try:
            await asyncio.wait_for(done.wait(), TIME_LIMIT_S)
        finally:
            elapsed = time.perf_counter() - started
            await consumer.shutdown()
    client.meter.per_message(max(seen, 1))
    if seen < expected:
        raise RuntimeError(f"consumed {seen} of {expected}")
    return seen / elapsed


async def consume_lite_pull(client: RealClient, total: int, pull_batch: int = PULL_BATCH) -> float:
    """A prefilled topic read with blocking ``LitePullConsumer.poll`` calls on a
    worker thread (the application's thread); start and shutdown are timed too."""
    per_queue = total // QUEUES
    for first in range(0, per_queue * QUEUES, BATCH):  # prefill, not timed
        await client.send_batch(0, first, BATCH)
    expected = (per_queue * QUEUES) // BATCH * BATCH

    def drain(deadline: float) -> int:
        consumer = LitePullConsumer(
            CONSUMER_GROUP + "Lite",
            client.server.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=pull_batch,
        )
        consumer.subscribe(client.topic)
        consumer.start()
        seen = 0
        try:
            while seen < expected and time.perf_counter() < deadline:
                messages = consumer.poll(1.0)
                for message in messages:
                    _ = message.body
                seen += len(messages)
        finally:
            consumer.shutdown()
        return seen

    started = time.perf_counter()
    with client.meter:
        seen = await asyncio.to_thread(drain, started + TIME_LIMIT_S)
    elapsed = time.perf_counter() - started
    client.meter.per_message(max(seen, 1))
    if seen < expected:
        raise RuntimeError(f"consumed {seen} of {expected}")
    return seen / elapsed


async def latency_push(client: RealClient, total: int, rate: float = 1000.0) -> dict[str, float]:
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    acks: list[float] = []
    done = asyncio.Event()

    def listener(messages: list[MessageExt]) -> None:
        arrived = time.perf_counter()
        for message in messages:
            (seq,) = SEQ.unpack_from(message.body)
            started_at = sent_at.pop(seq, None)
            if started_at is not None:
                latencies.append(arrived - started_at)
        if len(latencies) >= total:
            done.set()

    consumer = client.consumer(listener, 1, CONSUMER_GROUP + "Latency")
    await consumer.start()
    try:
        # Warm-up: until a message sent now comes back (queues assigned, pulls held).
        for warm in range(1_000_000, 1_000_000 + 50):
            sent_at[warm] = time.perf_counter()
            await client.producer.send(client.message(warm))
            await asyncio.sleep(0.02)
            if latencies:
                break
        latencies.clear()
        interval = 1.0 / rate
        with client.meter:
            started = time.perf_counter()
            for i in range(total):
                due = started + i * interval
                pause = due - time.perf_counter()
                if pause > 0:
                    await asyncio.sleep(pause)
                sent_at[i] = begun = time.perf_counter()
                await client.producer.send(client.message(i))
                acks.append(time.perf_counter() - begun)
            await asyncio.wait_for(done.wait(), 30.0)
    finally:
        await consumer.shutdown()
    client.meter.per_message(max(len(latencies), 1))
    return latency_stats(latencies, started, acks, await round_trips(client))


# -- scenarios ------------------------------------------------------------------------


async def windowed(
    meter: Meter, total: int, window: int, step: Callable[[int], Awaitable[int]]
) -> float:
    """Run `step(i)` (returns messages sent) with `window` in flight; msgs/s."""
    started = time.perf_counter()
    deadline = started + TIME_LIMIT_S
    counter = itertools.count()
    done = 0

    async def worker() -> None:
        nonlocal done
        while done < total and time.perf_counter() < deadline:
            sent = await step(next(counter))  # not `done += await ...`: that loses updates
            done += sent

    with meter:
        await asyncio.gather(*(worker() for _ in range(window)))
    meter.per_message(done)
    return done / (time.perf_counter() - started)


async def produce_batch(client: RawClient, total: int, batch: int = BATCH) -> float:
    async def step(i: int) -> int:
        await client.send_batch(i % QUEUES, i * batch, batch)
        return batch

    await step(0)  # warm-up: connection, topic, first mapped files
    return await windowed(client.meter, total, BATCH_WINDOW, step)


async def send_async(client: RawClient, total: int) -> float:
    async def step(i: int) -> int:
        await client.send_one(i % QUEUES, i)
        return 1

    await step(0)
    return await windowed(client.meter, total, SEND_WINDOW, step)


async def consume(client: RawClient, total: int) -> float:
    per_queue = total // QUEUES
    for queue_id in range(QUEUES):  # prefill, not timed
        for first in range(0, per_queue, BATCH):
            await client.send_batch(queue_id, first, min(BATCH, per_queue - first))
    seen = 0

    def listener(count: int) -> None:
        nonlocal seen
        seen += count

    async def drain(queue_id: int, deadline: float) -> None:
        offset = 0
        while offset < per_queue and time.perf_counter() < deadline:
            offset, body = await client.pull(queue_id, offset)
            if body is not None:
                listener(len(decode_records(body, decompress=True)))

    started = time.perf_counter()
    with client.meter:
        await asyncio.gather(*(drain(q, started + TIME_LIMIT_S) for q in range(QUEUES)))
    elapsed = time.perf_counter() - started
    client.meter.per_message(max(seen, 1))
    if seen != per_queue * QUEUES:
        raise RuntimeError(f"consumed {seen} of {per_queue * QUEUES}")
    return seen / elapsed


async def latency(client: RawClient, total: int, rate: float = 1000.0) -> dict[str, float]:
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    acks: list[float] = []
    stop = asyncio.Event()

    async def consumer(queue_id: int) -> None:
        offset = 0
        while not stop.is_set():
            offset, body = await client.pull(queue_id, offset, suspend_ms=15_000)
            if body is None:
                continue
            arrived = time.perf_counter()
            for message in decode_records(body, decompress=True):
                (seq,) = SEQ.unpack_from(message.body)
                latencies.append(arrived - sent_at.pop(seq))
            if len(latencies) >= total:
                stop.set()

    # Warm-up and start the long polls at the end of each queue.
    for queue_id in range(QUEUES):
        sent_at[queue_id] = time.perf_counter()
        await client.send_one(queue_id, queue_id)
    tasks = [asyncio.create_task(consumer(q)) for q in range(QUEUES)]
    while len(latencies) < QUEUES:
        await asyncio.sleep(0.01)
    latencies.clear()
    interval = 1.0 / rate
    started = time.perf_counter()
    client.meter.__enter__()
    for i in range(total):
        due = started + i * interval
        pause = due - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)
        seq = QUEUES + i
        sent_at[seq] = begun = time.perf_counter()
        await client.send_one(i % QUEUES, seq)
        acks.append(time.perf_counter() - begun)
    try:
        await asyncio.wait_for(stop.wait(), 30.0)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    client.meter.__exit__()
    client.meter.per_message(max(len(latencies), 1))
    return latency_stats(latencies, started, acks, await round_trips(client))


async def round_trips(client: RawClient, count: int = 1000) -> list[float]:
    """Round trips of a request the broker answers from memory (GET_MAX_OFFSET):
    the floor any send or delivery latency sits on, on this machine now."""
    command = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, {"topic": client.topic, "queueId": "0"}
    )
    times = []
    for _ in range(count):
        begun = time.perf_counter()
        await client.remoting.invoke(client.server.broker, command, 5.0)
        times.append(time.perf_counter() - begun)
        await asyncio.sleep(0.001)
    return times


def latency_stats(
    latencies: list[float], started: float, acks: list[float], rtts: list[float]
) -> dict[str, float]:
    ordered = sorted(latencies)
    acks.sort()
    rtts.sort()
    return {
        "send_ack_p50_ms": acks[len(acks) // 2] * 1000,
        "rtt_p50_ms": rtts[len(rtts) // 2] * 1000,
        "rtt_p99_ms": rtts[int(len(rtts) * 0.99)] * 1000,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p90_ms": ordered[int(len(ordered) * 0.9)] * 1000,
        "p99_ms": ordered[int(len(ordered) * 0.99)] * 1000,
        "max_ms": ordered[-1] * 1000,
        "rate": len(ordered) / (time.perf_counter() - started),
    }


# -- driver ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    flush: str
    default_count: int
    target: float


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("produce-batch", "async", 300_000, 200_000),
        Scenario("send-async", "async", 100_000, 50_000),
        Scenario("send-async-autobatch", "async", 200_000, 50_000),
        Scenario("produce-batch-sync", "sync", 200_000, 100_000),
        Scenario("consume", "async", 200_000, 250_000),
        Scenario("lite-pull", "async", 200_000, 250_000),
        Scenario("latency", "async", 5_000, 0.0),
    )
}


CLIENT_ONLY = frozenset({"lite-pull", "send-async-autobatch"})
"""Scenarios that measure the client library itself: no --raw variant."""


async def run_once(
    scenario: Scenario, server: Server, count: int, raw: bool, batch: int, pull_batch: int
) -> Result:
    client = (
        RawClient(server, "BenchTopic")
        if raw
        else RealClient(server, "BenchTopic", auto_batch=scenario.name == "send-async-autobatch")
    )
    try:
        await client.setup()
        if scenario.name == "latency":
            if isinstance(client, RealClient):
                stats = await latency_push(client, count)
            else:
                stats = await latency(client, count)
            met = stats["p50_ms"] <= 0.3 and stats["p99_ms"] <= 0.5
            stats.update(client.meter.detail)
            return Result(scenario.name, stats["p50_ms"], "ms p50", "p50<=0.3 p99<=0.5", met, stats)
        if scenario.name == "consume":
            if isinstance(client, RealClient):
                rate = await consume_push(client, count)
            else:
                rate = await consume(client, count)
        elif scenario.name == "lite-pull":
            if not isinstance(client, RealClient):
                raise SystemExit("lite-pull measures the client library: run it without --raw")
            rate = await consume_lite_pull(client, count, pull_batch)
        elif scenario.name in ("send-async", "send-async-autobatch"):
            if raw and scenario.name in CLIENT_ONLY:
                raise SystemExit(
                    f"{scenario.name} measures the client library: run it without --raw"
                )
            rate = await send_async(client, count)
        else:
            rate = await produce_batch(client, count, batch)
        target = f">= {scenario.target:,.0f}"
        met = rate >= scenario.target
        return Result(scenario.name, rate, "msgs/s", target, met, client.meter.detail)
    finally:
        await client.close()


def run(
    scenario: Scenario,
    count: int,
    profile_dir: Path | None,
    index: int,
    raw: bool,
    batch: int,
    pull_batch: int,
) -> Result:
    root = Path(tempfile.mkdtemp(prefix="tidemq-e2e-"))
    try:
        name = f"{scenario.name}-{index}"
        with running_server(root, scenario.flush, profile_dir, name) as server:
            return event_loop.run(run_once(scenario, server, count, raw, batch, pull_batch))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def median_result(results: list[Result]) -> Result:
    ordered = sorted(results, key=lambda r: r.value)
    middle = ordered[len(ordered) // 2]
    middle.detail = dict(middle.detail)
    middle.detail["runs"] = len(results)
    for i, result in enumerate(results):
        middle.detail[f"run{i + 1}"] = round(result.value, 3)
    if middle.scenario == "latency":
        p99s = sorted(r.detail["p99_ms"] for r in results)
        middle.detail["p99_ms_median"] = statistics.median(p99s)
    return middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--messages", type=int, help="override each scenario's message count")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile-server", type=Path)
    parser.add_argument(
        "--batch-size", type=int, default=BATCH, help="messages per batch in produce-batch(-sync)"
    )
    parser.add_argument(
        "--pull-batch-size",
        type=int,
        default=PULL_BATCH,
        help="pull_batch_size of the lite-pull scenario's LitePullConsumer",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="drive the broker with the bare remoting client instead of the client library",
    )
    args = parser.parse_args()
    names = args.scenario or [n for n in SCENARIOS if not (args.raw and n in CLIENT_ONLY)]
    results = []
    for name in names:
        scenario = SCENARIOS[name]
        count = args.messages or scenario.default_count
        runs = [
            run(
                scenario,
                count,
                args.profile_server,
                i,
                args.raw,
                args.batch_size,
                args.pull_batch_size,
            )
            for i in range(args.repeat)
        ]
        results.append(median_result(runs))
        if not args.json:
            print_row(results[-1])
    if args.json:
        print(json.dumps([r.__dict__ for r in results], indent=2))


def print_row(result: Result) -> None:
    verdict = "met" if result.met else "missed"
    d = result.detail
    if result.scenario == "latency":
        text = f"p50 {d['p50_ms']:.3f} ms, p90 {d['p90_ms']:.3f}, p99 {d['p99_ms']:.3f} ms"
    else:
        text = f"{result.value:>12,.0f} msgs/s"
    cpu = (
        f"cpu/msg client {d.get('client_us_per_msg', 0):5.1f} us"
        f" ({d.get('client_cpu_pct', 0):.0f}%) server {d.get('server_us_per_msg', 0):5.1f} us"
        f" ({d.get('server_cpu_pct', 0):.0f}%)"
    )
    print(f"{result.scenario:<19} {text:<40} {cpu:<52} {result.target:<18} {verdict}", flush=True)
    if result.scenario == "latency":
        print(
            f"{'':<19} send acknowledged p50 {d['send_ack_p50_ms']:.3f} ms; bare round trip"
            f" p50 {d['rtt_p50_ms']:.3f} ms, p99 {d['rtt_p99_ms']:.3f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
