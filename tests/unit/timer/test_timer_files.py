"""Formats: the timer log and the timer files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.store.file_store import FileMessageStore
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import make_message, small_config
from tidemq.timer.buckets import UNIT, TimerFiles, Unit, UnitKind, decode_units, encode_unit
from tidemq.timer.checkpoint import TimerCheckpointError, load_checkpoint
from tidemq.timer.log import TimerLog, TimerLogError


def test_log_append_read_and_roll(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "log", 4096)
    log.open(0, {})
    records = [(1000 + i, 50 * i, bytes([i]) * 700) for i in range(12)]
    positions = log.append_many(records)
    assert len(log.segments) >= 2  # 12 x 728 bytes do not fit 4096
    for (eff, source, raw), position in zip(records, positions, strict=True):
        got = log.read(position)
        assert (got.eff_ms, got.source_offset, got.raw) == (eff, source, raw)
    for segment in log.segments:
        inside = [
            e
            for (e, _, _), p in zip(records, positions, strict=True)
            if segment.start <= p < segment.end
        ]
        assert log.bookkeeping()[segment.start] == max(inside)
    with pytest.raises(TimerLogError):
        log.read(positions[-1] + 1)
    log.close()


def test_log_torn_tail_is_cut_and_positions_are_not_reused(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "log", 1 << 20)
    log.open(0, {})
    first, second = log.append_many([(1, 10, b"a" * 100), (2, 20, b"b" * 100)])
    log.close()
    (segment,) = (tmp_path / "log").iterdir()
    segment.write_bytes(segment.read_bytes()[:-5])
    again = TimerLog(tmp_path / "log", 1 << 20)
    tail = again.open(0, {})
    assert [r.source_offset for r in tail] == [10]
    assert again.holds(first) and not again.holds(second)
    (third,) = again.append_many([(3, 30, b"c" * 10)])
    assert third > second  # the torn region is never handed out again
    assert again.read(third).source_offset == 30
    assert again.read(first).raw == b"a" * 100
    again.close()


def test_log_retires_segments_below_the_watermark(tmp_path: Path) -> None:
    log = TimerLog(tmp_path / "log", 4096)
    log.open(0, {})
    log.append_many([(100 * i, i, b"x" * 1500) for i in range(8)])
    count = len(log.segments)
    assert count >= 3
    gone = log.retire(250)  # segments whose records are all < 250
    assert gone and all(s.max_eff_ms >= 250 for s in log.segments)
    assert len(list((tmp_path / "log").iterdir())) == count - len(gone)
    log.close()


def test_units_round_trip_and_bad_crc_is_skipped(tmp_path: Path) -> None:
    units = [Unit(1000 + i, i * 64, i * 100, i + 1, UnitKind.NORMAL) for i in range(5)]
    units.append(Unit(1004, -1, 999, 3, UnitKind.RECALL))
    data = bytearray(b"".join(encode_unit(u) for u in units))
    assert decode_units(bytes(data))[0] == units
    data[UNIT.size * 2 + 3] ^= 0xFF
    good, bad = decode_units(bytes(data))
    assert bad == 1 and good == units[:2] + units[3:]


def test_timer_files_bucket_and_cut_torn_unit(tmp_path: Path) -> None:
    files = TimerFiles(tmp_path / "b", 60_000)
    a = Unit(60_000 + 5, 0, 1, 1, UnitKind.NORMAL)
    b = Unit(120_000 + 5, 0, 2, 2, UnitKind.NORMAL)
    files.append([a, b])
    assert files.starts() == [60_000, 120_000]
    path = files.path(60_000)
    path.write_bytes(path.read_bytes() + b"\x00" * 17)  # a torn append
    again = TimerFiles(tmp_path / "b", 60_000)
    c = Unit(60_000 + 9, 0, 3, 3, UnitKind.NORMAL)
    again.append([c])
    assert again.read(60_000) == [a, c]
    assert path.stat().st_size == 2 * UNIT.size
    dirty, _ = again.take_dirty()
    assert dirty == [60_000]
    again.delete(60_000)
    assert again.starts() == [120_000]


def test_checkpoint_unreadable_is_a_clear_error(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path) is None
    (tmp_path / "checkpoint.json").write_text("{not json")
    with pytest.raises(TimerCheckpointError, match="unreadable"):
        load_checkpoint(tmp_path)


async def test_commitlog_max_offset_in_both_stores(tmp_path: Path) -> None:
    config = small_config(tmp_path / "s")
    for store in (FileMessageStore(config), MemoryMessageStore(config)):
        store.open()
        try:
            assert store.commitlog_max_offset() == 0
            first = await store.put_message(make_message("T", "a"))
            assert store.commitlog_max_offset() == first.physical_offset + first.size
            second = await store.put_message(make_message("T", "bb"))
            assert store.commitlog_max_offset() == second.physical_offset + second.size
        finally:
            store.close()


def test_a_failed_sync_leaves_files_unsynced(tmp_path: Path) -> None:
    """What a checkpoint took to sync and could not is taken again next time:
    a later checkpoint must never claim those bytes durable."""
    log = TimerLog(tmp_path / "log", 4096)
    log.open(0, {})
    log.append_many([(1000 + i, i, bytes([i]) * 700) for i in range(8)])
    fds, new = log.take_unsynced()
    assert fds and new
    assert log.take_unsynced() == ([], False)
    log.requeue_unsynced(fds, new)
    assert sorted(log.take_unsynced()[0]) == sorted(fds)
    log.close()

    files = TimerFiles(tmp_path / "b", 60_000)
    files.append([Unit(60_000 + 5, 0, 1, 1, UnitKind.NORMAL)])
    dirty, created = files.take_dirty()
    assert dirty == [60_000] and created
    assert files.take_dirty() == ([], False)
    files.requeue_dirty(dirty, created)
    assert files.take_dirty() == ([60_000], True)
