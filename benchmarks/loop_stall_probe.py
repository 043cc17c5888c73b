"""Where the slow messages of a latency run lose their time: the broker instrumented.

Runs `tidemq serve` (this checkout) with three probes put in before it starts
(this file's `--serve-child` mode): an event-loop lag probe (a task that
sleeps 1 ms and notes how late it wakes), a watchdog thread that takes the
loop thread's stack while the loop has not run the probe for `--stall-ms`,
and gc callbacks. Then a latency phase like the peer harness's
(../shared/bench-peers): a `Producer` sends 1 KiB messages stamped with
CLOCK_MONOTONIC at `--rate` with `send` (the calling thread), a
`PushConsumer` with an `async def` listener in a forked process notes when
each arrives. It prints the latency percentiles, the slowest messages with
their time since the first send, and every loop stall and gc pass over
`--stall-ms` with the innermost frames of the loop thread (and where each
other thread was), where the stall's time went (the loop thread's CPU and
run-queue wait from /proc schedstat), and the consumer's own loop stalls
and gc passes.

    .venv/bin/python benchmarks/loop_stall_probe.py --seconds 10
    .venv/bin/python benchmarks/loop_stall_probe.py --flush sync --stall-ms 2

This is how the 36-41 ms max of every harness repetition was found: one
stall at the first message, in `IndexService.reserve` -> `_create_file` ->
`prefault` (docs/benchmarks.md, "The max latency of every run"). The
patches reach into the broker (`Broker.start`), so this is a diagnostic, not
a benchmark of record: the numbers it prints include the probes' own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tidemq.transport.ports import free_port, wait_listening

STAMP = struct.Struct("<q")
ROOT = Path(__file__).resolve().parent.parent


# -- the server side (runs in the `tidemq serve` process) ------------------------------


def _serve_child(out_path: str, stall_ms: float, serve_args: list[str]) -> None:
    """Install the probes, then run `tidemq serve` as the CLI would."""
    events: list[dict[str, Any]] = []
    lock = threading.Lock()
    stall_ns = int(stall_ms * 1e6)

    def note(kind: str, start_ns: int, end_ns: int, **detail: Any) -> None:
        with lock:
            events.append({"kind": kind, "start": start_ns, "end": end_ns, **detail})

    gc_started: list[int] = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        now = time.monotonic_ns()
        if phase == "start":
            gc_started[0] = now
        elif now - gc_started[0] >= stall_ns:
            note("gc", gc_started[0], now, generation=info["generation"])

    gc.callbacks.append(on_gc)

    def writer() -> None:
        written = 0
        while True:
            time.sleep(0.5)
            with lock:
                fresh = events[written:]
                written = len(events)
            with open(out_path, "a") as out:
                for event in fresh:
                    out.write(json.dumps(event) + "\n")

    threading.Thread(target=writer, name="probe-writer", daemon=True).start()

    from tidemq.server import broker as broker_module

    original_start = broker_module.Broker.start

    async def start(self: Any) -> None:
        await original_start(self)
        loop_thread = threading.get_ident()
        schedstat = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        beat = [time.monotonic_ns()]
        seen: dict[int, tuple[int, int, int]] = {}
        """Per stall (its last beat): when the watchdog saw it, and the loop
        thread's CPU and run-queue wait (ns, /proc schedstat) at that moment."""

        def sched() -> tuple[int, int]:
            with open(schedstat) as stat:
                cpu, wait, _ = stat.read().split()
            return int(cpu), int(wait)

        async def lag() -> None:
            while True:
                before = beat[0] = time.monotonic_ns()
                await asyncio.sleep(0.001)
                beat[0] = now = time.monotonic_ns()
                if now - before - 1_000_000 < stall_ns:
                    continue
                detail: dict[str, Any] = {}
                first = seen.pop(before, None)
                if first is not None:  # where the stall's time went, from when it was seen
                    cpu, wait = sched()
                    detail = {
                        "seen_for_ms": round((now - first[0]) / 1e6, 2),
                        "cpu_ms": round((cpu - first[1]) / 1e6, 2),
                        "runqueue_ms": round((wait - first[2]) / 1e6, 2),
                    }
                note("lag", before + 1_000_000, now, **detail)

        def watchdog() -> None:
            while True:
                time.sleep(stall_ms / 4000)
                since = beat[0]
                if since in seen or time.monotonic_ns() - since < stall_ns:
                    continue
                cpu, wait = sched()
                seen[since] = (time.monotonic_ns(), cpu, wait)
                frames = sys._current_frames()
                names = {thread.ident: thread.name for thread in threading.enumerate()}
                stacks = []
                for ident, frame in frames.items():
                    if ident == threading.get_ident():
                        continue
                    inner = traceback.format_stack(frame)[-3 if ident == loop_thread else -1 :]
                    where = " | ".join(line.strip().split("\n")[0] for line in inner)
                    name = "loop" if ident == loop_thread else names.get(ident, str(ident))
                    stacks.append(f"[{name}] {where}")
                note("stack", since, time.monotonic_ns(), stack=" || ".join(sorted(stacks)))

        threading.Thread(target=watchdog, name="probe-watchdog", daemon=True).start()
        self._spawn(lag(), "loop-lag-probe")

    broker_module.Broker.start = start  # type: ignore[method-assign]

    from tidemq.cli.main import main

    sys.argv = ["tidemq", "serve", *serve_args]
    main()


# -- the latency phase (this process and a forked consumer) ----------------------------


def _consume(
    namesrv: str, topic: str, count: int, stall_ms: float, ready: Any, results: Any
) -> None:
    from tidemq import ConsumeStatus, PushConsumer

    arrivals: list[tuple[int, int]] = []
    done = threading.Event()
    events: list[dict[str, Any]] = []
    stall_ns = int(stall_ms * 1e6)
    gc_started = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        now = time.monotonic_ns()
        if phase == "start":
            gc_started[0] = now
        elif now - gc_started[0] >= stall_ns:
            generation = info["generation"]
            events.append(
                {"kind": "gc", "start": gc_started[0], "end": now, "generation": generation}
            )

    gc.callbacks.append(on_gc)

    async def lag() -> None:  # on the consumer's loop thread
        while True:
            before, cpu_before = time.monotonic_ns(), time.thread_time_ns()
            await asyncio.sleep(0.001)
            now = time.monotonic_ns()
            if now - before - 1_000_000 >= stall_ns:
                cpu_ms = round((time.thread_time_ns() - cpu_before) / 1e6, 2)
                events.append(
                    {"kind": "lag", "start": before + 1_000_000, "end": now, "loop_cpu_ms": cpu_ms}
                )

    async def listener(messages: Any, context: Any) -> ConsumeStatus:
        now = time.monotonic_ns()
        for message in messages:
            arrivals.append((STAMP.unpack_from(message.body, 0)[0], now))
        if len(arrivals) >= count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("StallProbeGroup", namesrv=namesrv, listener=listener)
    consumer.subscribe(topic)
    consumer.start()
    probe = asyncio.run_coroutine_threadsafe(lag(), consumer._loop.loop)  # its private loop
    time.sleep(1.0)  # the rebalance assigns the queues (as the harness waits)
    ready.set()
    done.wait(count / 100 + 60)
    probe.cancel()
    consumer.shutdown()
    results.send((arrivals, [{"side": "consumer", **event} for event in events]))


def _produce(namesrv: str, topic: str, count: int, rate: float) -> None:
    from tidemq import Producer, make_message

    producer = Producer("StallProbeProducers", namesrv=namesrv)
    producer.start()
    tail = os.urandom(1016)
    next_at = time.perf_counter()
    try:
        for _ in range(count):
            next_at += 1 / rate
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            producer.send(make_message(topic, STAMP.pack(time.monotonic_ns()) + tail))
    finally:
        producer.shutdown()


def _percentile(values: list[int], q: float) -> float:
    index = max(0, min(len(values) - 1, int(q / 100 * len(values) + 0.5) - 1))
    return values[index] / 1e6


def _report(arrivals: list[tuple[int, int]], events: list[dict[str, Any]], top: int) -> None:
    arrivals.sort()
    delays = sorted(received - stamp for stamp, received in arrivals)
    first = arrivals[0][0]
    print(
        f"{len(arrivals)} messages: p50 {_percentile(delays, 50):.3f} ms, "
        f"p99 {_percentile(delays, 99):.3f} ms, max {delays[-1] / 1e6:.2f} ms"
    )
    print(f"the first message: {(arrivals[0][1] - first) / 1e6:.2f} ms")
    print(f"slowest {top} (time of the send after the first one, latency):")
    for stamp, received in sorted(arrivals, key=lambda a: a[0] - a[1])[:top]:
        print(f"  t+{(stamp - first) / 1e6:9.1f} ms  {(received - stamp) / 1e6:7.2f} ms")
    end = arrivals[-1][1]
    during = [e for e in events if first - 50_000_000 <= e["start"] <= end]
    stacks = {e["start"]: e["stack"] for e in during if e["kind"] == "stack"}
    measured = [e for e in during if "seen_for_ms" in e]
    if measured:  # where the broker's stall time went, from when the watchdog saw each
        seen = sum(e["seen_for_ms"] for e in measured)
        cpu = sum(e["cpu_ms"] for e in measured)
        queued = sum(e["runqueue_ms"] for e in measured)
        print(
            f"broker loop stalls: {len(measured)}, {seen:.1f} ms seen; of it the loop thread "
            f"ran {cpu:.1f} ms (our code), waited for a CPU {queued:.1f} ms (the machine), "
            f"and was blocked {max(0.0, seen - cpu - queued):.1f} ms (the GIL, I/O)"
        )
    print("loop stalls and gc passes (t+ start, side, length, where the time went, what ran):")
    for event in sorted(during, key=lambda e: e["start"]):
        if event["kind"] == "stack":
            continue
        length = (event["end"] - event["start"]) / 1e6
        split = ""
        if "seen_for_ms" in event:
            cpu, queued = event["cpu_ms"], event["runqueue_ms"]
            blocked = max(0.0, event["seen_for_ms"] - cpu - queued)
            split = f" [cpu {cpu:.1f} runqueue {queued:.1f} blocked {blocked:.1f}]"
        if "loop_cpu_ms" in event:  # the consumer's: its loop thread's own CPU in the stall
            split = f" [its loop ran {event['loop_cpu_ms']:.1f}]"
        what = f"gc generation {event['generation']}" if event["kind"] == "gc" else ""
        stack = stacks.get(event["start"] - 1_000_000, "")
        if stack:  # the loop thread's frames; the others' too when something blocked it
            loop_part = next(
                (part for part in stack.split(" || ") if part.startswith("[loop]")), ""
            )
            what = stack if "blocked" in split and float(split.split()[-1][:-1]) > 1 else loop_part
        start = (event["start"] - first) / 1e6
        side, kind = event["side"], event["kind"]
        print(f"  t+{start:9.1f} ms {side:8s} {kind:3s} {length:6.2f} ms{split} {what}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-child":
        _serve_child(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--flush", choices=("async", "sync"), default="async")
    parser.add_argument("--stall-ms", type=float, default=3.0)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="stall-probe-"))
    events_path = data / "probe-events.jsonl"
    namesrv_port, broker_port = free_port(), free_port()
    serve_args = [
        "--data-dir", str(data / "data"),
        "--namesrv-port", str(namesrv_port),
        "--broker-port", str(broker_port),
        "--grpc-port", str(free_port()),
        "--flush", args.flush,
    ]  # fmt: skip
    log = (data / "serve.log").open("wb")
    probe_args = ["--serve-child", str(events_path), str(args.stall_ms)]
    server = subprocess.Popen(
        [sys.executable, __file__, *probe_args, *serve_args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    count = int(args.rate * args.seconds)
    try:
        deadline = time.monotonic() + 120
        for port in (namesrv_port, broker_port):
            if not wait_listening(port, deadline):
                raise SystemExit(f"nothing listens on {port}")
        namesrv = f"127.0.0.1:{namesrv_port}"
        tidemq = str(Path(sys.executable).parent / "tidemq")
        subprocess.run(
            [tidemq, "topic", "create", "StallProbe", "--queues", "8", "--namesrv", namesrv],
            check=True,
            capture_output=True,
        )
        context = multiprocessing.get_context("fork")
        ready = context.Event()
        receive, send = context.Pipe(duplex=False)
        consumer = context.Process(
            target=_consume,
            args=(namesrv, "StallProbe", count, args.stall_ms, ready, send),
            daemon=True,
        )
        consumer.start()
        if not ready.wait(60):
            raise SystemExit("the consumer did not start")
        _produce(namesrv, "StallProbe", count, args.rate)
        if not receive.poll(count / 100 + 90):
            raise SystemExit("the consumer gave no result")
        arrivals, consumer_events = receive.recv()
        consumer.join(10)
        time.sleep(1.0)  # the probe writer flushes every 0.5 s
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
        log.close()
    lines = events_path.read_text().splitlines() if events_path.exists() else []
    events = [{"side": "broker", **json.loads(line)} for line in lines if line]
    events += consumer_events
    shutil.rmtree(data, ignore_errors=True)
    if not arrivals:
        raise SystemExit("no message arrived")
    _report(arrivals, events, args.top)


if __name__ == "__main__":
    main()
