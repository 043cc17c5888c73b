"""The timer progress a master hands its slave: Java's 56-byte TimerCheckpoint
body, from tidemq's checkpoint, and GET_TIMER_CHECK_POINT on a broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.timer_progress import (
    TimerProgress,
    decode_progress,
    encode_progress,
    from_checkpoint,
    read_progress,
    save_master_progress,
)
from tidemq.broker.timers import TIMER_DIRECTORY
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.cores import NO_FEATURES, memory_core
from tidemq.timer.checkpoint import TimerCheckpoint, save_checkpoint

int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.tuples(*([int64] * 7)))
def test_a_body_decodes_to_what_was_encoded(fields: tuple[int, ...]) -> None:
    progress = TimerProgress(*fields)
    body = encode_progress(progress)
    assert len(body) == 56 and decode_progress(body) == progress


def test_an_old_body_without_a_data_version_and_a_broken_one() -> None:
    old = encode_progress(TimerProgress(5, 6, 7, 8))[:32]
    assert decode_progress(old) == TimerProgress(5, 6, 7, 8)
    with pytest.raises(ValueError, match="56 \\(or 32\\) bytes, not 3"):
        decode_progress(b"abc")


def test_tidemqs_checkpoint_in_javas_fields(tmp_path: Path) -> None:
    checkpoint = TimerCheckpoint(enqueue_offset=12, watermark_ms=1700, log_end=4096)
    assert from_checkpoint(checkpoint, 99) == TimerProgress(1700, 4096, 12, 12, 0, 99, 12)
    assert read_progress(tmp_path) == TimerProgress(0, 0, 0, 0)  # no checkpoint yet
    save_checkpoint(tmp_path, checkpoint)
    progress = read_progress(tmp_path)
    assert (progress.last_read_time_ms, progress.master_timer_queue_offset) == (1700, 12)
    assert progress.timestamp_ms > 0
    save_master_progress(tmp_path / "copy.json", progress)
    assert json.loads((tmp_path / "copy.json").read_text())["master_timer_queue_offset"] == 12


async def test_a_broker_answers_get_timer_check_point(tmp_path: Path) -> None:
    core = memory_core(tmp_path, NO_FEATURES)[0]
    handler = core.dispatch_table()[RequestCode.GET_TIMER_CHECK_POINT]
    request = RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT)
    timer_dir = tmp_path / "store" / TIMER_DIRECTORY
    save_checkpoint(timer_dir, TimerCheckpoint(enqueue_offset=3, watermark_ms=50))
    response = await handler(request, None)  # type: ignore[arg-type]
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert decode_progress(response.body or b"").last_timer_queue_offset == 3
    (timer_dir / "checkpoint.json").write_text("{")
    response = await handler(request, None)  # type: ignore[arg-type]
    assert response is not None and response.code == ResponseCode.SYSTEM_ERROR
    assert "unreadable" in (response.remark or "")
