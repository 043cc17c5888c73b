"""Smaller pieces: checkpoint bytes, delay levels, file naming and rolling."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.record.codec import BLANK_MAGIC, decode_record
from tidemq.store.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from tidemq.store.config import parse_delay_levels
from tidemq.store.file_store import FileMessageStore
from tidemq.store.mapped_file import file_name
from tidemq.testing.stores import make_message, small_config

offsets = st.integers(0, 2**62)


@given(offsets, offsets, offsets, offsets)
def test_checkpoint_round_trip(a: int, b: int, c: int, d: int) -> None:
    checkpoint = Checkpoint(a, b, c, d)
    assert decode_checkpoint(encode_checkpoint(checkpoint)) == checkpoint


def test_damaged_checkpoint_is_ignored() -> None:
    data = bytearray(encode_checkpoint(Checkpoint(1, 2, 3, 4)))
    data[10] ^= 1
    assert decode_checkpoint(bytes(data)) is None
    assert decode_checkpoint(b"short") is None


def test_default_delay_levels_are_rocketmqs() -> None:
    levels = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert len(levels) == 18
    assert levels[0] == 1000 and levels[2] == 10_000 and levels[-1] == 7_200_000
    with pytest.raises(ValueError, match="bad delay level"):
        parse_delay_levels("1s 5x")


def test_file_names_are_twenty_digit_start_offsets() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1073741824) == "00000000001073741824"


def test_a_record_that_does_not_fit_goes_to_the_next_file_after_a_blank(tmp_path: Path) -> None:
    config = small_config(tmp_path, commitlog_file_size=64 * 1024, max_message_size=16 * 1024)
    store = FileMessageStore(config)
    store.open()
    try:
        results = []
        for i in range(6):
            results.append(store.put_messages_blocking([make_message("T", bytes([i]) * 15_000)]))
        sixth = results[4].results[0]  # the 5th record does not fit the first 64 KiB
        assert sixth.physical_offset == 64 * 1024
        assert sixth.msg_id.endswith(f"{64 * 1024:016X}")
        first_file = store.commitlog.log.files[0]
        fourth = results[3].results[0]
        blank_at = fourth.physical_offset + fourth.size
        head = bytes(first_file.file.view(blank_at, 8))
        assert int.from_bytes(head[:4], "big") == 64 * 1024 - blank_at
        assert int.from_bytes(head[4:], "big", signed=True) == BLANK_MAGIC
        record = store.read_by_physical_offset(sixth.physical_offset)
        assert record is not None
        assert decode_record(record)[0].commit_log_offset == 64 * 1024
    finally:
        store.close()


def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = FileMessageStore(small_config(tmp_path))
    store.open()
    store.close()
    result = store.append([make_message("T", "late")])
    assert not result.ok
    assert "not open" in result.remark
