"""What message tracing costs a producer: the same sends against one `tidemq
serve` with `enable_trace` off and on, the two taking turns in every
repetition so that a slow spell of a shared machine hits both.

    .venv/bin/python benchmarks/trace_bench.py [--messages N] [--repeat N] [--json]

Phases, with our blocking Producer and 1 KiB bodies on a topic of 8 queues:
- send: `Producer.send`, one message a request (the caller-thread path);
- send-async: `Producer.send_async`, at most 256 in flight.

Reported per phase: msgs/s (median over the repetitions), the client
process's CPU per message (all its threads: the trace records, batching and
trace sends included), the ratio traced/plain, and what the trace dispatchers
dropped or failed to send (both should be 0: a drop means the trace queue
filled faster than its background task sent it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tidemq import AdminClient, Producer, make_message
from tidemq.testing.processes import serve

PHASES = ("send", "send-async")
BODY = b"x" * 1024
QUEUES = 8
IN_FLIGHT = 256
TIME_LIMIT_S = 120.0


def progress(text: str) -> None:
    print(f"[trace_bench] {text}", file=sys.stderr, flush=True)


def cpu_s() -> float:
    return time.process_time()


def send_all(producer: Producer, topic: str, count: int) -> None:
    for _ in range(count):
        producer.send(make_message(topic, BODY))


def send_async_all(producer: Producer, topic: str, count: int) -> None:
    pending: list[Future[Any]] = []
    for _ in range(count):
        pending.append(producer.send_async(make_message(topic, BODY)))
        if len(pending) >= IN_FLIGHT:
            pending.pop(0).result(timeout=60)
    for future in pending:
        future.result(timeout=60)


RUNS: dict[str, Callable[[Producer, str, int], None]] = {
    "send": send_all,
    "send-async": send_async_all,
}


def run_once(namesrv: str, topic: str, phase: str, traced: bool, count: int) -> dict[str, Any]:
    with Producer(f"TraceBench{'On' if traced else 'Off'}", namesrv, enable_trace=traced) as p:
        p.send(make_message(topic, BODY))  # the route, the connections
        began, cpu = time.perf_counter(), cpu_s()
        RUNS[phase](p, topic, count)
        elapsed, used = time.perf_counter() - began, cpu_s() - cpu
        dispatcher = p.trace_dispatcher  # read before shutdown flushes the rest
        queued = dispatcher.queued if dispatcher is not None else 0
    dropped = failed = 0
    if dispatcher is not None:
        dropped, failed = dispatcher.dropped, dispatcher.failed
    return {
        "msgs_per_s": count / elapsed,
        "cpu_us_per_msg": used / count * 1e6,
        "dropped": dropped,
        "failed": failed,
        "queued_at_end": queued,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[bool, list[dict[str, Any]]]] = {
        phase: {False: [], True: []} for phase in PHASES
    }
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp) / "data") as server:
        topic = "TraceBench"

        async def create() -> None:
            async with AdminClient(server.namesrv) as admin:
                await admin.create_topic(topic, queues=QUEUES)

        asyncio.run(create())
        started = time.monotonic()
        for repetition in range(args.repeat):
            for phase in PHASES:
                for traced in (False, True) if repetition % 2 == 0 else (True, False):
                    run = run_once(server.namesrv, topic, phase, traced, args.messages)
                    results[phase][traced].append(run)
                    progress(f"{repetition} {phase} trace={'on' if traced else 'off'}: {run}")
            if time.monotonic() - started > TIME_LIMIT_S:
                progress("time limit reached: fewer repetitions")
                break
    summary = {}
    for phase in PHASES:
        row: dict[str, Any] = {}
        for traced in (False, True):
            runs = results[phase][traced]
            key = "on" if traced else "off"
            row[f"msgs_per_s_{key}"] = round(statistics.median(r["msgs_per_s"] for r in runs))
            row[f"cpu_us_per_msg_{key}"] = round(
                statistics.median(r["cpu_us_per_msg"] for r in runs), 1
            )
        row["ratio_on_off"] = round(row["msgs_per_s_on"] / row["msgs_per_s_off"], 3)
        row["dropped"] = sum(r["dropped"] for r in results[phase][True])
        row["failed"] = sum(r["failed"] for r in results[phase][True])
        summary[phase] = row
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for phase, row in summary.items():
        off = f"off {row['msgs_per_s_off']:>7} msgs/s {row['cpu_us_per_msg_off']:>6} µs CPU/msg"
        on = f"on {row['msgs_per_s_on']:>7} msgs/s {row['cpu_us_per_msg_on']:>6} µs CPU/msg"
        print(
            f"{phase:<11} {off} | {on} | on/off {row['ratio_on_off']}"
            f"  dropped {row['dropped']} failed {row['failed']}"
        )


if __name__ == "__main__":
    main()
