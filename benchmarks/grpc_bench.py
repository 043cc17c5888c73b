"""gRPC throughput with the official RocketMQ 5 Python client (rocketmq-python-client).

    .venv/bin/python benchmarks/grpc_bench.py [--messages N] [--threads T] [--quick] [--json]

One `tidemq serve` (async flush) on free ports, a topic of 8 queues, 1 KiB
bodies. Two numbers, each bounded by a message count and a time limit:

- produce: `Producer.send` (blocking, one message per request, the only way
  the official client sends) from T threads sharing one producer;
- receive+ack: a SimpleConsumer in each of T threads, `receive(32, 30 s)` and
  one `ack` per message, until every produced message was acked.

The remoting numbers for the same machine come from e2e_bench.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

from cpu_figures import server_cpu_s
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import serve

BODY = b"x" * 1024
TIME_LIMIT_S = 120.0


def produce(endpoint: str, topic: str, count: int, threads: int) -> float:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    per_thread = count // threads
    errors: list[BaseException] = []
    deadline = time.monotonic() + TIME_LIMIT_S

    def work() -> None:
        try:
            for _ in range(per_thread):
                if time.monotonic() > deadline:
                    raise TimeoutError("produce ran out of time")
                message = Message()
                message.topic = topic
                message.body = BODY
                message.tag = "TagA"
                producer.send(message)
        except BaseException as exc:
            errors.append(exc)

    started = time.perf_counter()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    producer.shutdown()
    if errors:
        raise errors[0]
    return per_thread * threads / elapsed


def receive_and_ack(endpoint: str, topic: str, count: int, threads: int) -> float:
    config = ClientConfiguration(endpoint, Credentials())
    consumers = []
    for _ in range(threads):
        consumer = SimpleConsumer(config, "BenchGroup", {topic: FilterExpression("*")}, 2)
        consumer.startup()
        consumers.append(consumer)
    acked = 0
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + TIME_LIMIT_S

    def work(consumer: Any) -> None:
        nonlocal acked
        try:
            while True:
                with lock:
                    if acked >= count:
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"receive ran out of time at {acked} of {count}")
                for message in consumer.receive(32, 30):
                    consumer.ack(message)
                    with lock:
                        acked += 1
        except BaseException as exc:
            errors.append(exc)

    started = time.perf_counter()
    pool = [threading.Thread(target=work, args=(c,)) for c in consumers]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    for consumer in consumers:
        consumer.shutdown()
    if errors:
        raise errors[0]
    return acked / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2,000 messages")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    count = 2_000 if args.quick else args.messages
    with tempfile.TemporaryDirectory() as scratch, serve(Path(scratch) / "data") as server:
        topic = "GrpcBench"
        asyncio.run(create_topic(server.namesrv, topic, queues=8))
        pid = server.popen.pid
        print(f"producing {count} x 1 KiB with {args.threads} threads ...", file=sys.stderr)
        before = server_cpu_s(pid)
        produced = produce(server.grpc, topic, count, args.threads)
        produce_cpu = server_cpu_s(pid) - before
        print(f"receiving + acking {count} with {args.threads} threads ...", file=sys.stderr)
        acked = count // args.threads * args.threads
        before = server_cpu_s(pid)
        consumed = receive_and_ack(server.grpc, topic, acked, args.threads)
        consume_cpu = server_cpu_s(pid) - before
    results = {
        "messages": count,
        "threads": args.threads,
        "produce_msgs_per_s": round(produced),
        "produce_server_cpu_us_per_msg": round(produce_cpu / count * 1e6, 1),
        "receive_ack_msgs_per_s": round(consumed),
        "receive_ack_server_cpu_us_per_msg": round(consume_cpu / acked * 1e6, 1),
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'case':<14}{'msgs/s':>10}{'server CPU us/msg':>20}")
        for name, key in (("produce", "produce"), ("receive+ack", "receive_ack")):
            rate, cpu = results[f"{key}_msgs_per_s"], results[f"{key}_server_cpu_us_per_msg"]
            print(f"{name:<14}{rate:>10,}{cpu:>20}")


if __name__ == "__main__":
    main()
