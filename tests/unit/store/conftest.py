from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.common.clock import ManualClock
from tidemq.store.file_store import FileMessageStore
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import small_config


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["file", "memory"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> Iterator[FileMessageStore | MemoryMessageStore]:
    """Each conformance test runs against both implementations."""
    config = small_config(tmp_path / "store")
    instance: FileMessageStore | MemoryMessageStore
    if request.param == "file":
        instance = FileMessageStore(config, clock=clock)
    else:
        instance = MemoryMessageStore(config, clock=clock)
    instance.open()
    yield instance
    instance.close()
