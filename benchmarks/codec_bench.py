"""The client-side record codecs, compiled (`tidemq.record._records`) against
the pure-Python reference (`tidemq.record.codec`), in process, no I/O.

    .venv/bin/python benchmarks/codec_bench.py [--batch N] [--rounds N] [--json]

Each case works on runs of `--batch` messages (32: the client's pull batch)
with 1 KiB bodies and the properties a producer and the broker set (UNIQ_KEY,
TAGS, KEYS, WAIT, CLUSTER, MIN/MAX_OFFSET): decode_records (a pull response),
decode_record_columns (the Spark source), encode_batch and split_batch (a
SEND_BATCH_MESSAGE body, client and broker side), batch_unique_ids (the
producer's batch checks) and the whole `SendCodec.prepare_batch` (checks and
body; the messages keep the UNIQ_KEY they carry, so no id is made).
Reported: the best round's ns per message of each implementation and the
speedup. Bounded by rounds and a time limit per case.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from tidemq.client import _send
from tidemq.common.clock import SystemClock
from tidemq.common.message import Message
from tidemq.common.message_id import UniqueIdGenerator
from tidemq.record import codec, records

BODY_SIZE = 1024
TIME_LIMIT_S = 2.0
"""Per case and implementation: rounds stop early past it."""


def make_properties(index: int) -> dict[str, str]:
    return {
        "UNIQ_KEY": f"7F000001{index:024X}",
        "TAGS": "TagA",
        "KEYS": f"order-{index}",
        "WAIT": "true",
        "CLUSTER": "DefaultCluster",
        "MIN_OFFSET": "0",
        "MAX_OFFSET": str(100_000 + index),
    }


def pull_body(count: int) -> bytes:
    parts = []
    for index in range(count):
        raw_props = "".join(f"{k}\x01{v}\x02" for k, v in make_properties(index).items())
        parts.append(
            codec.encode_record(
                b"BenchTopic",
                index % 4,
                0,
                index,
                index * 1200,
                0,
                1_700_000_000_000 + index,
                bytes([10, 0, 0, 7]),
                52_000,
                1_700_000_000_005 + index,
                bytes([10, 0, 0, 1]),
                10_911,
                0,
                0,
                bytes([index % 256]) * BODY_SIZE,
                raw_props.encode(),
            )
        )
    return b"".join(parts)


def batch_messages(count: int) -> list[Message]:
    return [
        Message("BenchTopic", bytes([i % 256]) * BODY_SIZE, 0, make_properties(i))
        for i in range(count)
    ]


def best_ns(call: Callable[[], Any], rounds: int, per_round: int) -> float:
    """The fastest round's ns per call (`per_round` calls a round)."""
    best = float("inf")
    deadline = time.perf_counter() + TIME_LIMIT_S
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(per_round):
            call()
        best = min(best, (time.perf_counter_ns() - start) / per_round)
        if time.perf_counter() > deadline:
            break
    return best


def python_prepare_batch(send_codec: _send.SendCodec, messages: list[Message]) -> Any:
    """`prepare_batch` with the Python twins swapped in for the call."""
    namespace = vars(_send)
    compiled = {name: namespace[name] for name in ("batch_unique_ids", "encode_batch")}
    namespace["batch_unique_ids"] = records.python_batch_unique_ids
    namespace["encode_batch"] = codec.encode_batch
    try:
        return send_codec.prepare_batch(messages)
    finally:
        namespace.update(compiled)


def cases(batch: int) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name -> (python call, compiled call), each on `batch` messages."""
    body = pull_body(batch)
    messages = batch_messages(batch)
    batch_body = codec.encode_batch(messages)
    send_codec = _send.SendCodec("BenchGroup", UniqueIdGenerator(SystemClock()).next_id)
    return {
        "decode_records": (
            lambda: codec.decode_records(body, decompress=True),
            lambda: records.decode_records(body, decompress=True),
        ),
        "decode_record_columns": (
            lambda: codec.decode_record_columns(body),
            lambda: records.decode_record_columns(body),
        ),
        "encode_batch": (
            lambda: codec.encode_batch(messages),
            lambda: records.encode_batch(messages),
        ),
        "split_batch": (
            lambda: codec.split_batch(batch_body),
            lambda: records.split_batch(batch_body),
        ),
        "batch_unique_ids": (
            lambda: records.python_batch_unique_ids(messages, "BenchTopic", True, str),
            lambda: records.batch_unique_ids(messages, "BenchTopic", True, str),
        ),
        "prepare_batch": (
            lambda: python_prepare_batch(send_codec, messages),
            lambda: send_codec.prepare_batch(messages),
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32, help="messages per call (32)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per case (20)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    if records.IMPLEMENTATION != "compiled":
        print("the compiled module is not in use (TIDEMQ_NO_EXTENSIONS?)", file=sys.stderr)
        return 1
    per_round = max(1, 2000 // args.batch)
    results = []
    for name, (python_call, compiled_call) in cases(args.batch).items():
        if python_call() != compiled_call():
            print(f"{name}: the implementations disagree", file=sys.stderr)
            return 1
        python_ns = best_ns(python_call, args.rounds, per_round) / args.batch
        compiled_ns = best_ns(compiled_call, args.rounds, per_round) / args.batch
        results.append(
            {
                "case": name,
                "python_ns_per_msg": round(python_ns, 1),
                "compiled_ns_per_msg": round(compiled_ns, 1),
                "speedup": round(python_ns / compiled_ns, 2),
            }
        )
    if args.json:
        print(json.dumps({"batch": args.batch, "body_bytes": BODY_SIZE, "results": results}))
        return 0
    print(f"{args.batch} messages a call, {BODY_SIZE} B bodies; ns per message (best round)")
    print(f"{'case':<24}{'python':>10}{'compiled':>10}{'speedup':>9}")
    for row in results:
        print(
            f"{row['case']:<24}{row['python_ns_per_msg']:>10.0f}"
            f"{row['compiled_ns_per_msg']:>10.0f}{row['speedup']:>8.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
