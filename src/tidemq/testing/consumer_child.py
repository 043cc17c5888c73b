"""A push consumer in its own process, for tests that SIGKILL a consumer
mid-stream (rebalance, orderly crash, broadcasting restart).

Run as ``python -m tidemq.testing.consumer_child NAMESRV GROUP TOPIC OUT_FILE
[options]``: every batch the listener sees is appended to OUT_FILE as
``queue_id offset broker_name body`` lines and flushed before the listener
returns (so the file holds at least everything whose offset this process may
have committed); "ready" is printed on stdout once the consumer runs.

In the test, :class:`ConsumerChild` starts it, waits for "ready", kills it and
reads the file back (:func:`read_records` drops a line cut by the kill).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NamedTuple

__all__ = ["ChildRecord", "ConsumerChild", "read_records"]

READY = "ready"
_STOP_WAIT_S = 30.0


class ChildRecord(NamedTuple):
    """One message the child consumer was given."""

    queue_id: int
    offset: int
    broker_name: str
    body: str


def read_records(path: Path) -> list[ChildRecord]:
    """The records of a child's OUT_FILE; a line cut short by SIGKILL is left out."""
    if not path.exists():
        return []
    records: list[ChildRecord] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(" ")
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            records.append(ChildRecord(int(parts[0]), int(parts[1]), parts[2], parts[3]))
    return records


class ConsumerChild:
    """The child process seen from the test: ``await start()`` (returns once it
    is ready), ``kill()`` (SIGKILL), ``records()``; ``close()`` (in a
    ``finally``, or ``with contextlib.closing(child)``) kills it if it still
    runs and releases its pipes."""

    def __init__(
        self,
        namesrv: str,
        group: str,
        topic: str,
        out_file: Path,
        *,
        options: Sequence[str] = (),
        log_file: Path | None = None,
    ) -> None:
        self.out_file = out_file
        self._command = [
            sys.executable,
            "-m",
            __name__,
            namesrv,
            group,
            topic,
            str(out_file),
            *options,
        ]
        self._log_path = log_file
        self._log: IO[bytes] | None = None
        self._process: subprocess.Popen[str] | None = None

    async def start(self) -> None:
        """Start the process and wait until its consumer runs."""
        self.out_file.touch()
        self._log = self._log_path.open("wb") if self._log_path is not None else None
        self._process = subprocess.Popen(
            self._command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self._process.stdout is not None
        line = await asyncio.to_thread(self._process.stdout.readline)
        assert line.strip() == READY, f"the consumer child did not start: {line!r}"

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last offset commit."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(_STOP_WAIT_S)

    def records(self) -> list[ChildRecord]:
        return read_records(self.out_file)

    def close(self) -> None:
        self.kill()
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None


# -- the child side ----------------------------------------------------------------------


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="consumer_child")
    parser.add_argument("namesrv")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("out_file", type=Path)
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--broadcasting", action="store_true")
    parser.add_argument("--delay-s", type=float, default=0.0, help="pause after each batch")
    parser.add_argument("--instance-name")
    parser.add_argument("--offset-store-dir")
    parser.add_argument("--rebalance-interval-s", type=float, default=20.0)
    parser.add_argument("--persist-interval-s", type=float, default=5.0)
    parser.add_argument("--consume-thread-count", type=int, default=20)
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    from tidemq.client._core.rebalance import ConsumeFromWhere
    from tidemq.client.consumer.listener import (
        ConsumeConcurrentlyContext,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        ConsumeStatus,
        MessageModel,
    )
    from tidemq.client.consumer.push import AsyncPushConsumer
    from tidemq.common.message import MessageExt

    lock = threading.Lock()
    with args.out_file.open("a", encoding="utf-8") as out:

        def record(
            messages: list[MessageExt], context: ConsumeConcurrentlyContext | ConsumeOrderlyContext
        ) -> None:
            mq = context.mq
            lines = "".join(
                f"{mq.queue_id} {m.queue_offset} {mq.broker_name} {m.body.decode()}\n"
                for m in messages
            )
            with lock:
                out.write(lines)
                out.flush()
            if args.delay_s:
                # A slow listener is the workload being simulated (kept mid-stream for a
                # kill, or holding a queue while others rebalance): a pause, not a wait.
                time.sleep(args.delay_s)

        def concurrently(
            messages: list[MessageExt], context: ConsumeConcurrentlyContext
        ) -> ConsumeStatus:
            record(messages, context)
            return ConsumeStatus.CONSUME_SUCCESS

        def orderly(
            messages: list[MessageExt], context: ConsumeOrderlyContext
        ) -> ConsumeOrderlyStatus:
            record(messages, context)
            return ConsumeOrderlyStatus.SUCCESS

        model = MessageModel.BROADCASTING if args.broadcasting else MessageModel.CLUSTERING
        consumer = AsyncPushConsumer(
            args.group,
            args.namesrv,
            listener=orderly if args.orderly else concurrently,
            orderly=args.orderly,
            message_model=model,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            instance_name=args.instance_name,
            offset_store_dir=args.offset_store_dir,
            rebalance_interval_s=args.rebalance_interval_s,
            persist_interval_s=args.persist_interval_s,
            consume_thread_count=args.consume_thread_count,
        )
        consumer.subscribe(args.topic, "*")
        await consumer.start()
        print(READY, flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(_main(_arguments(sys.argv[1:])))
