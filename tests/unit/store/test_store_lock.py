"""One owner per store, and a read-only look at a store someone else owns."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.store.api import PutStatus
from tidemq.store.file_store import FileMessageStore
from tidemq.store.lock import StoreLockedError, lock_holder
from tidemq.store.read_only_fs import ReadOnlyFileSystem
from tidemq.testing.stores import make_message, small_config


def fingerprint(root: Path) -> dict[str, str]:
    """Every file's name, size and content: what 'changed nothing' means."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_a_second_owner_is_refused_naming_the_directory_and_pid(tmp_path: Path) -> None:
    config = small_config(tmp_path / "store")
    first = FileMessageStore(config)
    first.open()
    try:
        assert first.put_messages_blocking([make_message("T", "kept")]).ok
        with pytest.raises(StoreLockedError) as refused:
            FileMessageStore(config).open()
        assert str(config.root) in str(refused.value)
        assert f"process {os.getpid()}" in str(refused.value)
        assert lock_holder(config.root) == os.getpid()
        assert (config.root / "abort").exists()  # the refused open touched nothing
    finally:
        first.close()
    assert lock_holder(config.root) is None
    second = FileMessageStore(config)
    second.open()
    try:
        assert second.get_messages("g", "T", 0, 0, 10).message_count == 1
    finally:
        second.close()


def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    root = tmp_path / "store"
    child = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tidemq.store.file_store import FileMessageStore\n"
        "from tidemq.testing.stores import small_config\n"
        "store = FileMessageStore(small_config(Path(sys.argv[1])))\n"
        "store.open()\n"
        "print('open', flush=True)\n"
        "sys.stdin.read()\n"  # hold the lock until killed (or the test's end closes stdin)
    )
    with subprocess.Popen(
        [sys.executable, "-c", child, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "open"
        assert lock_holder(root) == process.pid
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    assert lock_holder(root) is None
    store = FileMessageStore(small_config(root))
    report = store.open()
    store.close()
    assert not report.clean_shutdown


def test_a_read_only_view_changes_nothing(tmp_path: Path) -> None:
    config = small_config(tmp_path / "store")
    owner = FileMessageStore(config)
    owner.open()
    try:
        for i in range(30):
            assert owner.put_messages_blocking([make_message("T", f"m{i}", queue_id=i % 2)]).ok
        owner.flush.wait_blocking(owner.commitlog.max_offset, 5)
        before = fingerprint(config.root)
        view = FileMessageStore(config, fs=ReadOnlyFileSystem())
        view.open_read_only()
        try:
            assert view.queues() == {"T": [0, 1]}
            assert view.max_offset("T", 0) == owner.max_offset("T", 0) == 15
            assert view.commitlog_max_offset() == owner.commitlog_max_offset()
            got = view.get_messages("g", "T", 1, 0, 100)
            assert got.message_count == 15
            refused = view.append([make_message("T", "not written")])
            assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        finally:
            view.close()
        assert fingerprint(config.root) == before
        assert (config.root / "abort").exists()
        assert lock_holder(config.root) == os.getpid()
    finally:
        owner.close()
