"""`tidemq store ...`: look at and exercise a store directly (no broker)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from tidemq.cli.defaults import default_data_dir
from tidemq.cli.output import console, emit, fail
from tidemq.common import properties as props
from tidemq.record.records import decode_records
from tidemq.store.api import GetStatus, MessageToStore
from tidemq.store.checkpoint import read_checkpoint
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.consumequeue import ENTRY_SIZE
from tidemq.store.file_store import FileMessageStore
from tidemq.store.lock import StoreLockedError, lock_holder
from tidemq.store.read_only_fs import ReadOnlyFileSystem

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Store directory (default: $TIDEMQ_HOME/store or ~/.tidemq/store).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")


def _root(data_dir: Path | None) -> Path:
    return data_dir if data_dir is not None else default_data_dir() / "store"


@click.group("store")
def store_group() -> None:
    """Work with a store directory directly."""


@store_group.command("demo")
@data_dir_option
@click.option("--messages", default=20_000, show_default=True, help="How many to write.")
@click.option("--flush", type=click.Choice(["async", "sync"]), default="async", show_default=True)
@json_option
def demo(data_dir: Path | None, messages: int, flush: str, as_json: bool) -> None:
    """Write messages into a store, read them back, query by key, and report."""
    if messages < 1:
        fail("--messages must be at least 1")
    root = _root(data_dir)
    store = FileMessageStore(StoreConfig(root=root, flush_mode=FlushMode(flush)))
    report = store.open()
    try:
        summary = _run_demo(store, messages, show_progress=not as_json)
    finally:
        store.close()
    summary["data_dir"] = str(root)
    summary["recovery"] = report.summary()
    emit(summary, as_json=as_json, title="tidemq store demo")
    if not as_json:
        console.print(
            f"\nThe data stays in [bold]{root}[/]. Look at it with "
            f"[bold]tidemq store inspect --data-dir {root}[/].\n"
            "To run a server that RocketMQ clients can use, start `tidemq serve`."
        )


def _run_demo(store: FileMessageStore, count: int, *, show_progress: bool) -> dict[str, Any]:
    topic = "DemoTopic"
    batch_size = 64
    body = b"x" * 1024
    start = time.perf_counter()
    first_queue_offset = store.max_offset(topic, 0)
    with Progress(disable=not show_progress, transient=True) as progress:
        task = progress.add_task("writing 1 KiB messages", total=count)
        written = 0
        while written < count:
            n = min(batch_size, count - written)
            batch = [
                MessageToStore(
                    topic=topic,
                    queue_id=0,
                    body=body,
                    properties=props.encode_properties(
                        {props.TAGS: "demo", props.KEYS: f"demo-{written + i}"}
                    ),
                )
                for i in range(n)
            ]
            result = store.put_messages_blocking(batch)
            if not result.ok:
                fail(f"write failed: {result.status.value}: {result.remark}")
            written += n
            progress.update(task, advance=n)
    write_seconds = time.perf_counter() - start
    start = time.perf_counter()
    offset, read = first_queue_offset, 0
    while True:
        got = store.get_messages("demo", topic, 0, offset, 32)
        if got.status is not GetStatus.FOUND:
            break
        read += got.message_count
        offset = got.next_begin_offset
    read_seconds = time.perf_counter() - start
    last_key = f"demo-{count - 1}"
    found = store.query_by_key(topic, last_key, 1)
    found_body = decode_records(b"".join(found.buffers))[0].body if found.buffers else b""
    return {
        "written": count,
        "write_msgs_per_s": round(count / write_seconds),
        "read": read,
        "read_msgs_per_s": round(read / read_seconds) if read_seconds else read,
        "query_by_key": f"{last_key} -> {'found' if found_body == body else 'NOT FOUND'}",
        "queue_max_offset": store.max_offset(topic, 0),
    }


@store_group.command("inspect")
@data_dir_option
@json_option
def inspect(data_dir: Path | None, as_json: bool) -> None:
    """Show files, offsets and queues of a store (recovering it if needed).

    A store a running server owns is only looked at: no recovery, no lock,
    not one byte changed."""
    root = _root(data_dir)
    if not (root / "commitlog").exists():
        fail(f"no store at {root} (no commitlog directory)")
    checkpoint = read_checkpoint(root / "checkpoint")
    config = _existing_layout(root)
    holder = lock_holder(root)
    if holder is None:
        store = FileMessageStore(config)
        try:
            recovery = store.open().summary()
        except StoreLockedError as exc:  # a server started a moment ago
            holder = exc.pid or 0
    if holder is not None:
        store = FileMessageStore(config, fs=ReadOnlyFileSystem())
        store.open_read_only()
        owner = f"process {holder}" if holder else "another process"
        recovery = f"not run: the store is in use by {owner}; shown read-only, as it is now"
    try:
        queues = [
            {
                "topic": topic,
                "queue": queue_id,
                "min_offset": store.min_offset(topic, queue_id),
                "max_offset": store.max_offset(topic, queue_id),
            }
            for topic, queue_ids in store.queues().items()
            for queue_id in queue_ids
        ]
        info = {
            "data_dir": str(root),
            "commitlog_files": len(store.commitlog.log.files),
            "commitlog_min_offset": store.commitlog.min_offset,
            "commitlog_max_offset": store.commitlog.max_offset,
            "earliest_message_time": store.earliest_message_time(),
            "checkpoint_before_open": None if checkpoint is None else checkpoint.__dict__,
            "in_use_by_pid": holder,
            "recovery": recovery,
        }
    finally:
        store.close()
    if as_json:
        emit({**info, "queues": queues}, as_json=True)
        return
    emit(info, as_json=False, title="store")
    if queues:
        emit(queues, as_json=False, title="queues")


def _existing_layout(root: Path) -> StoreConfig:
    """The store's file sizes as they are on disk (a server may have been
    started with other sizes than the defaults)."""
    config = StoreConfig(root=root)
    commitlog = sorted(p for p in config.commitlog_dir.iterdir() if p.name.isdigit())
    if commitlog:
        size = commitlog[0].stat().st_size
        config = dataclasses.replace(
            config,
            commitlog_file_size=size,
            max_message_size=min(config.max_message_size, size - 64 * 1024),
        )
    queue_files = sorted(
        p for p in config.consumequeue_dir.glob("*/*/*") if p.name.isdigit() and p.is_file()
    )
    if queue_files:
        entries = queue_files[0].stat().st_size // ENTRY_SIZE
        config = dataclasses.replace(config, consumequeue_entries_per_file=max(1, entries))
    return config
