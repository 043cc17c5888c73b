"""Where an append's time goes: commitlog vs consumequeue vs index, per message.

    .venv/bin/python benchmarks/append_breakdown.py [--messages 128000]

Times each dispatch stage separately (perf_counter around each) for batches of
32 messages of 1 KiB with TAGS and UNIQ_KEY, async flush, default file sizes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from tidemq.common import properties as props
from tidemq.store.api import MessageToStore
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=128_000)
    count = parser.parse_args().messages
    body = os.urandom(1024)
    messages = [
        MessageToStore(
            topic="BenchTopic",
            queue_id=i % 8,
            body=body,
            properties=props.encode_properties({props.TAGS: "TagA", props.UNIQ_KEY: f"U{i:012d}"}),
        )
        for i in range(count)
    ]
    root = Path(tempfile.mkdtemp(prefix="tidemq-breakdown-"))
    store = FileMessageStore(StoreConfig(root=root))
    store.open()
    commitlog = consumequeue = index = 0.0
    try:
        for start in range(0, count, 32):
            t0 = time.perf_counter()
            _, dispatches = store.commitlog.append(messages[start : start + 32], 1)
            t1 = time.perf_counter()
            for request in dispatches:
                key = (request.topic, request.queue_id)
                queue = store.consume_queues.get(key) or store._new_queue(*key)
                queue.put(
                    request.commitlog_offset, request.size, request.tags_code, request.queue_offset
                )
            t2 = time.perf_counter()
            for request in dispatches:
                store.index.build(request)
            t3 = time.perf_counter()
            commitlog += t1 - t0
            consumequeue += t2 - t1
            index += t3 - t2
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    total = commitlog + consumequeue + index
    for name, seconds in [
        ("commitlog", commitlog),
        ("consumequeue", consumequeue),
        ("index", index),
        ("total", total),
    ]:
        print(f"{name:<13} {seconds / count * 1e6:6.2f} us/msg")
    print(f"=> {count / total:,.0f} msgs/s")


if __name__ == "__main__":
    main()
