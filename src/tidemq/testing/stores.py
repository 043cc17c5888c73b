"""Helpers for tests and benchmarks that need a store: small files so they
roll, and a compact way to build messages."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tidemq.common import properties as props
from tidemq.store.api import MessageToStore
from tidemq.store.config import StoreConfig
from tidemq.store.fs import FaultyFileSystem, SimulatedFile
from tidemq.testing.waiting import HANG_GUARD_S


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    """A config with files small enough that tests cross file boundaries."""
    base = StoreConfig(
        root=root,
        commitlog_file_size=256 * 1024,
        consumequeue_entries_per_file=64,
        max_message_size=64 * 1024,
        index_max_hash_slots=256,
        index_max_count=2048,
    )
    return dataclasses.replace(base, **overrides)


def make_message(
    topic: str,
    body: bytes | str,
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    unique_key: str | None = None,
    properties: Mapping[str, str] | None = None,
    **fields: Any,
) -> MessageToStore:
    table: dict[str, str] = {}
    if tags is not None:
        table[props.TAGS] = tags
    if keys is not None:
        table[props.KEYS] = keys
    if unique_key is not None:
        table[props.UNIQ_KEY] = unique_key
    table.update(properties or {})
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=body.encode() if isinstance(body, str) else body,
        properties=props.encode_properties(table),
        **fields,
    )


class StuckFileSystem(FaultyFileSystem):
    """A disk whose fsync hangs while `stuck` is set, until `release` is set
    (or the hang guard passes): a sync-flush timeout without a real slow disk."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.release = threading.Event()
        self.stuck = False

    def open_file(self, path: Path, size: int) -> SimulatedFile:
        simulated = super().open_file(path, size)
        original = simulated.sync

        def slow_sync() -> None:
            if self.stuck:
                self.release.wait(HANG_GUARD_S)
            original()

        simulated.sync = slow_sync  # type: ignore[method-assign]
        return simulated  # type: ignore[return-value]
