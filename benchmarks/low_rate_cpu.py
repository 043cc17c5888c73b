"""What one message costs at a low, fixed rate: e2e delay, the producer's
send round trip, and the broker's CPU per message.

Why: the peer harness's latency phase (1,000 msg/s) is far from the broker's
throughput regime. A single send costs the broker about 40 us of CPU when
sends arrive back to back (e2e_bench send-async), but every message at
1,000/s arrives at an idle process, and this measures what it costs then.

`tidemq serve` (async flush) on free ports; a push consumer with an
`async def` listener in a forked process (as the peer harness's tidemq
adapter); `Producer.send` paced with sleeps at `--rate`; the body starts
with the CLOCK_MONOTONIC time of the send. With `--no-consumer` only the
producer runs (the send alone). `--spin` adds a task to the broker's loop
that never lets it sleep (a diagnostic: is it wake-up latency?). `--echo`
measures the machine's floor instead: a bare uvloop echo server (one
`Protocol.data_received` that writes back) and a blocking client, 1 KiB at
the same rate: the CPU a wake-up and a round trip cost with no Python work.

    .venv/bin/python benchmarks/low_rate_cpu.py --rate 1000 --messages 5000
    .venv/bin/python benchmarks/low_rate_cpu.py --rate 1000 --messages 5000 --no-consumer
    .venv/bin/python benchmarks/low_rate_cpu.py --rate 1000 --messages 5000 --echo
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tidemq.transport.ports import free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
TIDEMQ = ROOT / ".venv" / "bin" / "tidemq"
STAMP = struct.Struct("<q")
SPIN_ENV = "TIDEMQ_BENCH_SPIN"
"""Set in the broker's environment by --spin; read by `_spinning_serve`."""


def _paced(rate: float, count: int) -> Iterator[None]:
    """Yield `count` times, `rate` times a second, sleeping in between (never spinning)."""
    due = time.monotonic()
    for _ in range(count):
        due += 1.0 / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        yield


def _thread_cpu_ns(pid: int) -> dict[str, int]:
    """CPU ns per thread name of process `pid` (/proc schedstat: exact, not ticks)."""
    spent: dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue
        spent[name] = spent.get(name, 0) + ns
    return spent


def _consume(namesrv: str, topic: str, count: int, ready: Any, out: Connection) -> None:
    from tidemq import ConsumeStatus, PushConsumer

    delays: list[int] = []
    done = threading.Event()

    async def listener(messages: list[Any], context: object) -> ConsumeStatus:
        now = time.monotonic_ns()
        delays.extend(now - STAMP.unpack_from(m.body)[0] for m in messages)
        if len(delays) >= count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("LowRateGroup", namesrv=namesrv, listener=listener)
    consumer.subscribe(topic)
    consumer.start()
    try:
        time.sleep(1.0)  # the rebalance assigns the queues before the first send
        ready.set()
        done.wait(120)
    finally:
        consumer.shutdown()
    out.send(delays)


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


def run(rate: float, messages: int, queues: int, consumer: bool, spin: bool) -> dict[str, Any]:
    from tidemq import Producer, make_message

    namesrv_port, broker_port = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="tidemq-low-rate-")
    env = dict(os.environ)
    command = [str(TIDEMQ)]
    if spin:
        env[SPIN_ENV] = "1"
        command = [sys.executable, __file__, "--serve"]
    server = subprocess.Popen(
        [*command, "serve", "--data-dir", data, "--namesrv-port", str(namesrv_port),
         "--broker-port", str(broker_port), "--grpc-port", str(free_port())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        if not (wait_listening(namesrv_port, deadline) and wait_listening(broker_port, deadline)):
            raise SystemExit("tidemq serve did not start listening")
        namesrv = f"127.0.0.1:{namesrv_port}"
        topic = "LowRateTopic"
        subprocess.run(
            [str(TIDEMQ), "topic", "create", topic, "--queues", str(queues), "--namesrv", namesrv],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        context = multiprocessing.get_context("fork")
        ready = context.Event()
        receive, send = context.Pipe(duplex=False)
        child = None
        if consumer:
            child = context.Process(
                target=_consume, args=(namesrv, topic, messages, ready, send), daemon=True
            )
            child.start()
            if not ready.wait(60):
                raise SystemExit("the consumer did not start")
        producer = Producer("LowRateProducers", namesrv=namesrv)
        producer.start()
        tail = os.urandom(1024 - STAMP.size)
        round_trips: list[int] = []
        try:
            before = _thread_cpu_ns(server.pid)
            started = time.monotonic()
            for _ in _paced(rate, messages):
                sent_at = time.monotonic_ns()
                producer.send(make_message(topic, STAMP.pack(sent_at) + tail))
                round_trips.append(time.monotonic_ns() - sent_at)
            seconds = time.monotonic() - started
            after = _thread_cpu_ns(server.pid)
            delays: list[int] = []
            if child is not None:
                if not receive.poll(120):
                    raise SystemExit("the consumer gave no result")
                delays = receive.recv()
                child.join(10)
        finally:
            producer.shutdown()
        spent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
        busiest = sorted(spent.items(), key=lambda item: -item[1])[:3]
        result: dict[str, Any] = {
            "rate": rate,
            "messages": messages,
            "consumer": consumer,
            "spin": spin,
            "seconds": round(seconds, 2),
            "send_rtt_p50_ms": round(_percentile(round_trips, 0.5), 3),
            "broker_cpu_us_per_msg": round(sum(spent.values()) / messages / 1e3, 1),
            "broker_threads_cpu_ms": {name: round(ns / 1e6) for name, ns in busiest},
        }
        if delays:
            result["e2e_p50_ms"] = round(_percentile(delays, 0.5), 3)
            result["e2e_p99_ms"] = round(_percentile(delays, 0.99), 3)
            result["received"] = len(delays)
        return result
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        shutil.rmtree(data, ignore_errors=True)


def echo(rate: float, messages: int) -> dict[str, Any]:
    """The floor: a uvloop echo server in a forked process, paced 1 KiB round trips."""
    import asyncio

    import uvloop

    listener = socket.create_server(("127.0.0.1", 0))
    pid = os.fork()
    if pid == 0:  # the server: echo until killed

        class Echo(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def data_received(self, data: bytes) -> None:
                self.transport.write(data)  # type: ignore[attr-defined]

        async def serve() -> None:
            await asyncio.get_running_loop().create_server(Echo, sock=listener)
            await asyncio.sleep(3600)

        uvloop.run(serve())
        os._exit(0)
    try:
        client = socket.create_connection(listener.getsockname())
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = os.urandom(1024)
        round_trips: list[int] = []
        before = _thread_cpu_ns(pid)
        for _ in _paced(rate, messages):
            sent_at = time.monotonic_ns()
            client.sendall(payload)
            got = 0
            while got < len(payload):
                got += len(client.recv(65536))
            round_trips.append(time.monotonic_ns() - sent_at)
        spent = sum(_thread_cpu_ns(pid).values()) - sum(before.values())
        return {
            "rate": rate,
            "messages": messages,
            "echo": True,
            "round_trip_p50_ms": round(_percentile(round_trips, 0.5), 3),
            "server_cpu_us_per_msg": round(spent / messages / 1e3, 1),
        }
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _spinning_serve(argv: list[str]) -> None:
    """`tidemq serve` with a task that keeps its event loop from ever sleeping."""
    import asyncio

    from tidemq.cli.main import main as tidemq_main
    from tidemq.common import event_loop

    made = event_loop.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = made()

        async def spin() -> None:
            while True:
                await asyncio.sleep(0)

        loop.call_soon(lambda: loop.create_task(spin()))
        return loop

    event_loop.new_event_loop = new_event_loop  # type: ignore[assignment]
    sys.argv = ["tidemq", *argv]
    tidemq_main()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        _spinning_serve(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--no-consumer", action="store_true")
    parser.add_argument("--spin", action="store_true")
    parser.add_argument("--echo", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.echo:
        floor = echo(args.rate, args.messages)
        print(
            json.dumps(floor)
            if args.json
            else f"{args.rate:.0f} msg/s x {args.messages}, bare uvloop echo: round trip p50 "
            f"{floor['round_trip_p50_ms']} ms, server CPU {floor['server_cpu_us_per_msg']} us/msg"
        )
        return
    result = run(args.rate, args.messages, args.queues, not args.no_consumer, args.spin)
    if args.json:
        print(json.dumps(result))
        return
    line = (
        f"{args.rate:.0f} msg/s x {args.messages}: send round trip p50 "
        f"{result['send_rtt_p50_ms']} ms, broker CPU {result['broker_cpu_us_per_msg']} us/msg"
    )
    if "e2e_p50_ms" in result:
        line += f", e2e p50 {result['e2e_p50_ms']} ms p99 {result['e2e_p99_ms']} ms"
    print(line)
    print(f"  broker threads (CPU ms): {result['broker_threads_cpu_ms']}")


if __name__ == "__main__":
    main()
