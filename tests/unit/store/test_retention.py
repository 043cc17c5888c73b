"""Retention: the pure policy (properties) and the store applying it."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock
from tidemq.store.api import GetStatus
from tidemq.store.file_store import FileMessageStore
from tidemq.store.retention import (
    CommitLogFile,
    RetentionPolicy,
    select_deletions,
)
from tidemq.testing.stores import make_message, small_config

HOUR = 3_600_000
NOW = 1_000 * HOUR

files_strategy = st.lists(st.integers(0, 200), min_size=0, max_size=30).map(
    lambda ages: [CommitLogFile(i * 1024, NOW - age * HOUR) for i, age in enumerate(ages)]
)


def count_deletions(*args: Any, **kwargs: Any) -> int:
    """How many of the oldest files go now."""
    return len(select_deletions(*args, **kwargs))


@given(files_strategy, st.integers(0, 23), st.floats(0, 1), st.booleans())
def test_policy_deletes_a_prefix_of_old_files_never_the_last(
    files: list[CommitLogFile], hour: int, ratio: float, manual: bool
) -> None:
    policy = RetentionPolicy()
    count = count_deletions(files, NOW, policy, hour=hour, disk_ratio=ratio, manual=manual)

    assert 0 <= count <= min(policy.max_files_per_run, max(len(files) - 1, 0))
    allowed = hour in policy.delete_hours or ratio >= policy.disk_max_used_ratio or manual
    if not allowed:
        assert count == 0
    if ratio < policy.disk_force_clean_ratio:
        for item in files[:count]:
            assert item.last_modified_ms + policy.reserved_ms <= NOW


def test_policy_waits_for_the_hour_or_a_full_disk() -> None:
    files = [CommitLogFile(0, NOW - 100 * HOUR), CommitLogFile(1, NOW)]
    policy = RetentionPolicy()
    assert count_deletions(files, NOW, policy, hour=3, disk_ratio=0.1) == 0
    assert count_deletions(files, NOW, policy, hour=4, disk_ratio=0.1) == 1
    assert count_deletions(files, NOW, policy, hour=3, disk_ratio=0.8) == 1


def test_force_ratio_deletes_unexpired_files() -> None:
    files = [CommitLogFile(0, NOW), CommitLogFile(1, NOW)]
    policy = RetentionPolicy()
    assert count_deletions(files, NOW, policy, hour=3, disk_ratio=0.8) == 0
    assert count_deletions(files, NOW, policy, hour=3, disk_ratio=0.9) == 1


def test_store_deletes_expired_files_and_what_points_into_them(tmp_path: Path) -> None:
    clock = ManualClock()
    ratio = [0.5]
    config = small_config(tmp_path, consumequeue_entries_per_file=32)
    store = FileMessageStore(config, clock=clock, disk_usage=lambda _: ratio[0])
    store.open()
    try:
        for i in range(400):
            assert store.put_messages_blocking([make_message("T", bytes(2000), keys=f"k{i}")]).ok
        files = store.commitlog.log.files
        assert len(files) >= 3
        old = (clock.now_ms() - 80 * HOUR) / 1000
        for mapped in files[:-1]:
            os.utime(mapped.file.path, (old, old))
        cq_files_before = len(store.consume_queues[("T", 0)].log.files)

        assert store.run_retention() == []  # not the hour, disk not full
        ratio[0] = 0.8
        removed = store.run_retention()

        assert any("commitlog" in str(p) for p in removed)
        assert len(store.commitlog.log.files) == 1
        min_offset = store.min_offset("T", 0)
        assert min_offset > 0
        assert len(store.consume_queues[("T", 0)].log.files) < cq_files_before
        old_read = store.get_messages("g", "T", 0, 0, 32)
        assert old_read.status is GetStatus.OFFSET_TOO_SMALL
        assert old_read.next_begin_offset == min_offset
        assert store.get_messages("g", "T", 0, min_offset, 32).status is GetStatus.FOUND
        assert store.query_by_key("T", "k0", 1).physical_offsets == []
        assert store.query_by_key("T", "k399", 1).physical_offsets
    finally:
        store.close()


@given(files_strategy, st.integers(0, 23), st.floats(0, 1), st.booleans(), st.booleans())
def test_deletions_are_forced_exactly_when_not_expired(
    files: list[CommitLogFile], hour: int, ratio: float, manual: bool, forcibly: bool
) -> None:
    policy = RetentionPolicy(clean_forcibly=forcibly)
    forced = select_deletions(files, NOW, policy, hour=hour, disk_ratio=ratio, manual=manual)

    assert len(forced) == count_deletions(
        files, NOW, policy, hour=hour, disk_ratio=ratio, manual=manual
    )
    for item, was_forced in zip(files, forced, strict=False):
        assert was_forced == (item.last_modified_ms + policy.reserved_ms > NOW)
    if not forcibly or ratio < policy.disk_force_clean_ratio:
        assert not any(forced)


def fill_two_topics(store: FileMessageStore) -> None:
    for i in range(300):
        topic = "T" if i % 3 else "U"
        message = make_message(topic, bytes(2000), queue_id=i % 2, keys=f"k{i}")
        assert store.put_messages_blocking([message]).ok


def test_forced_deletion_is_a_warning_naming_what_it_took_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    ratio = [0.5]
    config = small_config(tmp_path, consumequeue_entries_per_file=32)
    store = FileMessageStore(config, clock=clock, disk_usage=lambda _: ratio[0])
    store.open()
    try:
        fill_two_topics(store)
        assert len(store.commitlog.log.files) >= 3  # none expired: written just now
        caplog.set_level(logging.INFO, logger="tidemq.store")

        ratio[0] = 0.87  # above the force ratio (0.85)
        removed = store.run_retention()

        commitlog_removed = [p for p in removed if "commitlog" in str(p)]
        assert commitlog_removed
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        forced = [w for w in warnings if "had not expired" in w]
        assert len(forced) == 1
        lost = 0
        for topic, queue_id in [("T", 0), ("T", 1), ("U", 0), ("U", 1)]:
            first = store.min_offset(topic, queue_id)
            assert first > 0
            assert f"{topic}/{queue_id} [0, {first})" in forced[0]
            lost += first
        assert f"{lost} messages are gone" in forced[0] and "87%" in forced[0]
        counters = store.retention
        assert counters.forced_files == len(commitlog_removed) == counters.deleted_files
        assert counters.forced_messages == lost
        info = store.runtime_info()
        assert info["tidemqForcedDeletedFiles"] == str(len(commitlog_removed))
        assert info["tidemqForcedDeletedMessages"] == str(lost)
        assert info["commitLogDiskRatio"] == "0.87"
    finally:
        store.close()


def test_expired_deletions_are_not_forced_and_forced_cleaning_can_be_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    ratio = [0.87]
    config = small_config(tmp_path, consumequeue_entries_per_file=32, clean_file_forcibly=False)
    store = FileMessageStore(config, clock=clock, disk_usage=lambda _: ratio[0])
    store.open()
    try:
        fill_two_topics(store)
        caplog.set_level(logging.INFO, logger="tidemq.store")
        assert store.run_retention() == []  # nothing expired, forced cleaning off

        old = (clock.now_ms() - 80 * HOUR) / 1000
        for mapped in store.commitlog.log.files[:-1]:
            os.utime(mapped.file.path, (old, old))
        assert store.run_retention()
        assert store.retention.forced_files == 0 and store.retention.deleted_files > 0
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any("retention deleted" in r.getMessage() for r in caplog.records)
    finally:
        store.close()
