"""Recovery after clean stops and crashes, with files damaged on purpose."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tidemq.common.clock import ManualClock
from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus
from tidemq.store.config import FlushMode, StoreConfig
from tidemq.store.consumequeue import ENTRY
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import CrashPlan, FaultyFileSystem
from tidemq.testing.stores import make_message, small_config


def all_bodies(store: FileMessageStore, topic: str, queue_id: int) -> list[bytes]:
    """Every body in a queue, checking each record sits at its queue offset."""
    bodies: list[bytes] = []
    offset = store.min_offset(topic, queue_id)
    while True:
        got = store.get_messages("check", topic, queue_id, offset, 32)
        if got.status is not GetStatus.FOUND:
            assert got.status is GetStatus.OFFSET_OVERFLOW_ONE, got.status
            return bodies
        for expected, message in zip(got.queue_offsets, decode_records(got.body()), strict=True):
            assert message.queue_offset == expected
            assert message.topic == topic
            bodies.append(message.body)
        offset = got.next_begin_offset


def open_store(config: StoreConfig, **kwargs: object) -> FileMessageStore:
    store = FileMessageStore(config, **kwargs)  # type: ignore[arg-type]
    store.open()
    return store


def test_clean_restart_keeps_everything_and_reports_a_clean_stop(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = open_store(config)
    sent = [f"m{i}".encode() * 100 for i in range(600)]  # crosses commitlog files
    for body in sent:
        assert store.put_messages_blocking([make_message("T", body, keys=body[:8].decode())]).ok
    store.close()
    assert len(list(config.commitlog_dir.iterdir())) > 1

    again = open_store(config)
    report = again.recovery_report

    assert report is not None and report.clean_shutdown and not report.dropped_anything
    assert report.redispatched == 0
    assert all_bodies(again, "T", 0) == sent
    assert again.query_by_key("T", "m599m599", 5).physical_offsets
    assert again.put_messages_blocking([make_message("T", "after")]).results[0].queue_offset == 600
    again.close()


def crash_after(
    tmp_path: Path, seed: int, plan: CrashPlan
) -> tuple[StoreConfig, list[bytes], list[bytes]]:
    """Write acknowledged (synced) and unacknowledged messages, then crash."""
    fs = FaultyFileSystem(seed)
    config = small_config(
        tmp_path,
        flush_mode=FlushMode.SYNC,
        flush_interval_commitlog_ms=60_000,
        flush_interval_consumequeue_ms=60_000,
    )
    store = open_store(config, fs=fs)
    acked: list[bytes] = []
    for i in range(300):
        body = f"acked-{seed}-{i}-".encode() * (1 + fs.random.randrange(40))
        assert store.put_messages_blocking([make_message("T", body, keys=f"a{i}")]).ok
        acked.append(body)
    unacked = [f"lost-{i}".encode() * 30 for i in range(50)]
    for body in unacked:
        assert store.append([make_message("T", body)]).ok
    store.flush.stop()
    fs.crash(plan)
    return config, acked, unacked


@pytest.mark.parametrize("seed", range(8))
def test_crash_keeps_every_acknowledged_message_once(tmp_path: Path, seed: int) -> None:
    config, acked, unacked = crash_after(tmp_path, seed, CrashPlan(0.4, 0.4, bit_flips=0))

    store = open_store(config)
    bodies = all_bodies(store, "T", 0)
    report = store.recovery_report

    assert report is not None and not report.clean_shutdown
    assert bodies[: len(acked)] == acked
    assert bodies[len(acked) :] == unacked[: len(bodies) - len(acked)]
    assert store.query_by_key("T", "a299", 1).physical_offsets
    assert store.put_messages_blocking([make_message("T", "next")]).results[0].queue_offset == len(
        bodies
    )
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_bit_flips_in_unsynced_data_are_detected_and_reported(tmp_path: Path, seed: int) -> None:
    config, acked, unacked = crash_after(
        tmp_path, seed, CrashPlan(1.0, 0.0, bit_flips=3, flip_only="commitlog")
    )

    store = open_store(config)
    bodies = all_bodies(store, "T", 0)
    report = store.recovery_report
    assert report is not None

    assert bodies[: len(acked)] == acked
    survivors = bodies[len(acked) :]
    assert survivors == unacked[: len(survivors)]
    if len(survivors) < len(unacked):
        assert report.dropped_anything
        assert report.truncated_bytes > 0 or report.consumequeue_dropped
    store.close()


def test_torn_tail_is_truncated_and_reported(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = open_store(config)
    results = store.put_messages_blocking([make_message("T", f"m{i}" * 50) for i in range(10)])
    store.close()
    last = results.results[-1]
    # A crash mid-write: the last record's second half never reached the disk.
    segment = config.commitlog_dir / f"{0:020d}"
    data = bytearray(segment.read_bytes())
    half = last.physical_offset + last.size // 2
    data[half : last.physical_offset + last.size] = bytes(last.physical_offset + last.size - half)
    segment.write_bytes(bytes(data))
    # The crash came before any checkpoint covered the tail.
    config.checkpoint_path.unlink()
    config.abort_path.touch()

    again = open_store(config)
    report = again.recovery_report

    assert report is not None
    assert report.commitlog_end == last.physical_offset
    assert report.truncated_bytes > 0
    assert "invalid record" in report.stop_reason or "NUL" in report.stop_reason
    assert report.consumequeue_dropped == {"T/0": 1}
    assert all_bodies(again, "T", 0) == [f"m{i}".encode() * 50 for i in range(9)]
    again.close()


def test_consumequeue_entries_past_the_commitlog_are_dropped(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = open_store(config)
    store.put_messages_blocking([make_message("T", "kept")])
    store.close()
    # The consumequeue claims two more records the commitlog never got.
    cq_file = config.consumequeue_dir / "T" / "0" / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[20:60] = ENTRY.pack(10_000, 100, 0) + ENTRY.pack(10_100, 100, 0)
    cq_file.write_bytes(bytes(data))
    config.abort_path.touch()

    again = open_store(config)
    report = again.recovery_report

    assert report is not None and report.consumequeue_dropped == {"T/0": 2}
    assert again.max_offset("T", 0) == 1
    assert all_bodies(again, "T", 0) == [b"kept"]
    again.close()


def test_lost_consumequeue_is_rebuilt_from_the_commitlog(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = open_store(config)
    store.put_messages_blocking([make_message("T", f"m{i}", queue_id=i % 2) for i in range(40)])
    store.close()
    for path in (config.consumequeue_dir / "T" / "1").iterdir():
        path.unlink()
    config.checkpoint_path.unlink()
    config.abort_path.touch()

    again = open_store(config)

    assert again.recovery_report is not None and again.recovery_report.redispatched == 20
    assert all_bodies(again, "T", 1) == [f"m{i}".encode() for i in range(1, 40, 2)]
    again.close()


def test_crash_without_close_recovers_in_process(tmp_path: Path) -> None:
    """The kill -9 shape without a child process: the old store just vanishes."""
    clock = ManualClock()
    config = dataclasses.replace(small_config(tmp_path), flush_mode=FlushMode.SYNC)
    first = open_store(config, clock=clock)
    for i in range(50):
        assert first.put_messages_blocking([make_message("T", f"x{i}")]).ok
    first.flush.stop()  # the process dies: no close, no checkpoint, abort file stays
    first._release_lock()  # and the kernel drops its flock

    second = open_store(config, clock=clock)

    assert second.recovery_report is not None
    assert not second.recovery_report.clean_shutdown
    assert all_bodies(second, "T", 0) == [f"x{i}".encode() for i in range(50)]
    second.close()
