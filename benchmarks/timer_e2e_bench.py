"""Timer messages through the front door: one `tidemq serve` (async flush), one
client process sending timer messages at a steady rate over the remoting
protocol, each due a fixed time after it is sent.

    cd benchmarks && ../.venv/bin/python timer_e2e_bench.py [--rate 2000] [--seconds 10] [--json]

Lateness = store timestamp of the delivered record - the requested time
(TIMER_DELIVER_MS, set by the client); early deliveries are counted apart
(there must be none). Unlike `timer_bench.py` (store + timer service in one
process) the broker here also receives every send while it delivers, on the
same event loop. Bounded by count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from tidemq.client.producer import AsyncProducer, make_message
from tidemq.common import properties as props
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import serve

DUE_AFTER_MS = 2000
BODY = b"t" * 256
WINDOW = 256
"""Sends in flight at most."""


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(namesrv: str, rate: int, seconds: int) -> dict[str, object]:
    topic = "TimerE2E"
    await create_topic(namesrv, topic, queues=4)
    total = rate * seconds
    in_flight = asyncio.Semaphore(WINDOW)
    async with AsyncProducer("TimerE2EProducers", namesrv) as producer:
        start = time.monotonic()
        for i in range(total):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            await in_flight.acquire()
            due = int(time.time() * 1000) + DUE_AFTER_MS
            future = producer.send_async(make_message(topic, BODY, deliver_at=due))
            future.add_done_callback(lambda _: in_flight.release())
        for _ in range(WINDOW):
            await in_flight.acquire()
        send_s = time.monotonic() - start
    deadline = time.monotonic() + seconds + 60
    got = await read_topic(namesrv, topic)
    while len(got) < total and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        got = await read_topic(namesrv, topic)
    late = [m.store_timestamp - int(m.properties[props.TIMER_DELIVER_MS]) for m in got]
    return {
        "sent": total,
        "delivered": len(got),
        "offered_rate_per_s": rate,
        "achieved_send_rate_per_s": round(total / send_s),
        "lateness_p50_ms": percentile(late, 0.50),
        "lateness_p99_ms": percentile(late, 0.99),
        "lateness_max_ms": max(late),
        "early": sum(1 for x in late if x < 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-timer-e2e-") as work,
        serve(Path(work) / "data", flush="async") as server,
    ):
        result = asyncio.run(run(server.namesrv, args.rate, min(args.seconds, 60)))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
