"""The flush thread retries what is safe to retry, and only that."""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.store import file_store
from tidemq.store.checkpoint import Checkpoint, read_checkpoint
from tidemq.store.config import FlushMode
from tidemq.store.file_store import FileMessageStore
from tidemq.store.flush import FlushService
from tidemq.store.flush_retry import (
    RESOURCE_ERRNOS,
    SPACE_ERRNOS,
    FlushPart,
    is_transient,
    next_retry_delay,
)
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import eventually, wait_until

DEADLINE_S = 10.0
ALL_ERRNOS = sorted(errno.errorcode)


# -- the policy ----------------------------------------------------------------------


@given(st.sampled_from(ALL_ERRNOS), st.sampled_from(list(FlushPart)))
def test_only_resource_and_derived_space_errors_are_transient(code: int, part: FlushPart) -> None:
    retryable = RESOURCE_ERRNOS | (SPACE_ERRNOS if part is FlushPart.DERIVED else frozenset())
    assert is_transient(OSError(code, "x"), part) == (code in retryable)


@given(st.sampled_from(ALL_ERRNOS))
def test_what_the_commitlog_retries_the_derived_part_retries_too(code: int) -> None:
    error = OSError(code, "x")
    if is_transient(error, FlushPart.COMMITLOG):
        assert is_transient(error, FlushPart.DERIVED)


@pytest.mark.parametrize("part", list(FlushPart))
def test_an_fsync_io_error_is_never_retried(part: FlushPart) -> None:
    assert not is_transient(OSError(errno.EIO, "Input/output error"), part)
    assert not is_transient(OSError(errno.EROFS, "read-only"), part)


@given(st.sampled_from([ValueError("x"), RuntimeError("x"), OSError("no errno"), KeyError(1)]))
def test_errors_without_a_resource_errno_are_permanent(error: BaseException) -> None:
    assert not any(is_transient(error, part) for part in FlushPart)


def test_memory_error_is_a_resource_shortage() -> None:
    assert all(is_transient(MemoryError(), part) for part in FlushPart)


@given(
    first=st.floats(min_value=1e-4, max_value=1.0),
    maximum=st.floats(min_value=1e-4, max_value=30.0),
    steps=st.integers(min_value=1, max_value=60),
)
def test_delays_start_at_first_double_and_stay_under_the_cap(
    first: float, maximum: float, steps: int
) -> None:
    delays: list[float] = []
    previous: float | None = None
    for _ in range(steps):
        previous = next_retry_delay(previous, first=first, maximum=maximum)
        delays.append(previous)
    assert delays[0] == min(first, maximum)
    assert all(0 < d <= maximum for d in delays)
    assert all(b >= a for a, b in itertools.pairwise(delays))
    assert all(b <= 2 * a for a, b in itertools.pairwise(delays))
    if steps >= 40:  # 2**39 covers any first/maximum ratio drawn here
        assert delays[-1] == maximum


def test_default_delays_are_10ms_doubling_to_1s() -> None:
    delays: list[float] = []
    previous: float | None = None
    for _ in range(9):
        previous = next_retry_delay(previous)
        delays.append(previous)
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]


# -- the service ---------------------------------------------------------------------


class Disk:
    """Injected flush callables: each fails with its queued errors, then works."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.commitlog_errors: list[BaseException] = []
        self.derived_errors: list[BaseException] = []
        self.written = 0
        self.commitlog_calls = 0
        self.derived_calls = 0
        self.derived_ok = 0

    def flush_commitlog(self) -> int:
        with self.lock:
            self.commitlog_calls += 1
            if self.commitlog_errors:
                raise self.commitlog_errors.pop(0)
            return self.written

    def flush_derived(self) -> None:
        with self.lock:
            self.derived_calls += 1
            if self.derived_errors:
                raise self.derived_errors.pop(0)
            self.derived_ok += 1


def service(disk: Disk, *, sync: bool = True, derived_ms: int = 1000) -> FlushService:
    return FlushService(
        sync_mode=sync,
        flush_commitlog=disk.flush_commitlog,
        flush_derived=disk.flush_derived,
        commitlog_interval_ms=5,
        derived_interval_ms=derived_ms,
        retry_first_delay_s=0.001,
        retry_max_delay_s=0.02,
    )


def emfile() -> OSError:
    return OSError(errno.EMFILE, "Too many open files")


def flush_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tidemq.store.flush"]


def test_commitlog_emfile_is_retried_and_writers_wait_until_it_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = Disk()
    disk.commitlog_errors = [emfile() for _ in range(1000)]  # failing until cleared below
    flush = service(disk)
    flush.start()
    try:
        disk.written = 100
        outcome: list[bool] = []
        writer = threading.Thread(target=lambda: outcome.append(flush.wait_blocking(100, 30)))
        writer.start()
        wait_until(lambda: disk.commitlog_calls >= 5, "five failed commitlog syncs")
        assert outcome == [], "acknowledged while the commitlog sync was failing"
        trouble = flush.trouble
        assert trouble is not None and trouble.part is FlushPart.COMMITLOG
        assert "EMFILE" in trouble.error and trouble.retries >= 3
        assert flush.failed is None
        with disk.lock:
            disk.commitlog_errors.clear()
        writer.join(DEADLINE_S)
        assert outcome == [True]
        assert flush.trouble is None and flush.failed is None
        assert flush.wait_blocking(100, 1)
    finally:
        flush.stop()
    records = flush_records(caplog)
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in records]
    assert "commitlog flush failed (EMFILE" in warnings[0].getMessage()
    assert "recovered after" in warnings[1].getMessage()
    assert not [r for r in records if r.levelno >= logging.ERROR]


async def test_async_writers_are_acknowledged_after_n_failures() -> None:
    disk = Disk()
    disk.commitlog_errors = [emfile(), OSError(errno.ENOMEM, "no memory"), emfile()]
    disk.written = 50
    flush = service(disk)
    flush.start()
    try:
        durable = await asyncio.wait_for(flush.wait_async(50), DEADLINE_S)
        assert durable is True
        assert disk.commitlog_calls >= 4
        assert flush.trouble is None
    finally:
        flush.stop()


async def test_a_writer_that_timed_out_is_dropped_not_kept() -> None:
    disk = Disk()
    disk.commitlog_errors = [emfile() for _ in range(1000)]
    disk.written = 10
    flush = service(disk)
    flush.start()
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await flush.wait_async(10)
        before = disk.commitlog_calls
        await eventually(lambda: disk.commitlog_calls >= before + 2, "two more retries")
        assert not flush._waiters  # the abandoned waiter is not carried along
        with disk.lock:
            disk.commitlog_errors.clear()
        assert await asyncio.wait_for(flush.wait_async(10), DEADLINE_S)
    finally:
        flush.stop()


def test_derived_no_space_is_retried_while_sends_are_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = Disk()
    disk.derived_errors = [OSError(errno.ENOSPC, "No space left on device") for _ in range(4)]
    flush = service(disk, derived_ms=5)
    flush.start()
    try:
        wait_until(lambda: disk.derived_calls >= 2, "a failed derived flush")
        disk.written = 7
        assert flush.wait_blocking(7, DEADLINE_S), "the commitlog works: acknowledge"
        wait_until(lambda: disk.derived_ok >= 1, "the derived flush to work again")
        wait_until(lambda: flush.trouble is None, "the episode to end")
        assert flush.failed is None
    finally:
        flush.stop()
    messages = [r.getMessage() for r in flush_records(caplog)]
    assert sum("consumequeue/index/checkpoint flush failed (ENOSPC" in m for m in messages) == 1
    assert sum("recovered after 4 retries" in m for m in messages) == 1


@pytest.mark.parametrize(
    "error",
    [OSError(errno.EIO, "Input/output error"), OSError(errno.ENOSPC, "No space left")],
    ids=["EIO", "ENOSPC"],
)
def test_a_permanent_commitlog_error_fails_writers_and_stops(error: OSError) -> None:
    disk = Disk()
    disk.commitlog_errors = [error]
    disk.written = 5
    flush = service(disk)
    flush.start()
    try:
        assert flush.wait_blocking(5, DEADLINE_S) is False
        wait_until(lambda: flush.failed is not None, "the failure to be recorded")
        assert flush.failed is error
        assert disk.commitlog_calls == 1, "an fsync error must not be retried"
        assert flush.wait_blocking(5, 1) is False, "later writers are refused at once"
    finally:
        flush.stop()


def test_a_permanent_derived_error_stops_the_service() -> None:
    disk = Disk()
    disk.derived_errors = [OSError(errno.EIO, "Input/output error")]
    flush = service(disk, derived_ms=5)
    flush.start()
    try:
        wait_until(lambda: disk.derived_calls >= 1, "the derived flush")
        wait_until(lambda: flush.failed is not None, "the failure to be recorded")
        assert disk.derived_calls == 1
    finally:
        flush.stop()


def test_stop_during_trouble_ends_the_thread_and_marks_the_failure() -> None:
    disk = Disk()
    disk.commitlog_errors = [emfile() for _ in range(1000)]
    disk.written = 3
    flush = service(disk)
    flush.start()
    outcome: list[bool] = []
    writer = threading.Thread(target=lambda: outcome.append(flush.wait_blocking(3, 30)))
    writer.start()
    wait_until(lambda: disk.commitlog_calls >= 3, "failing syncs")
    flush.stop()
    writer.join(DEADLINE_S)
    assert outcome == [False]
    assert flush.failed is not None, "an unclean stop must not look clean to the store"


# -- the store, with the checkpoint out of file descriptors --------------------------


async def test_store_keeps_acknowledging_while_the_checkpoint_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported hazard: one EMFILE on checkpoint.tmp used to refuse every later send."""
    config = small_config(tmp_path, flush_mode=FlushMode.SYNC, flush_interval_consumequeue_ms=10)
    store = FileMessageStore(config)
    store.open()
    failures = 0
    real_write = file_store.write_checkpoint
    starved = threading.Event()
    starved.set()

    def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
        nonlocal failures
        if starved.is_set():
            failures += 1
            raise OSError(errno.EMFILE, "Too many open files", str(path) + ".tmp")
        real_write(path, checkpoint)

    monkeypatch.setattr(file_store, "write_checkpoint", write_checkpoint)
    try:
        for i in range(5):
            assert (await store.put_message(make_message("T", f"while starved {i}"))).ok
        await eventually(lambda: failures >= 3, "failed checkpoint writes")
        assert (await store.put_message(make_message("T", "still starved"))).ok
        trouble = store.flush.trouble
        assert trouble is not None and trouble.part is FlushPart.DERIVED
        assert "EMFILE" in trouble.error
        shown = store.runtime_info()["tidemqFlushTrouble"]
        assert (
            shown.startswith("consumequeue/index/checkpoint flush failing (") and "EMFILE" in shown
        )
        starved.clear()
        await eventually(lambda: store.flush.trouble is None, "the checkpoint to be written")
        assert store.runtime_info()["tidemqFlushTrouble"] == ""
        assert (await store.put_message(make_message("T", "after"))).ok
        assert store.flush.failed is None
    finally:
        store.close()
    checkpoint = read_checkpoint(config.checkpoint_path)
    assert checkpoint is not None and checkpoint.commitlog_offset == store.commitlog.max_offset
