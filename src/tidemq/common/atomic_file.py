"""Replacing a small file so that a crash leaves the old or the new one.

Write a temporary file beside it, fsync it, rename it over the old one, then
fsync the directory so the rename itself is durable. Checkpoints, topic and
group tables, consumer offsets and delay progress all go through here. A
write that fails (ENOSPC) removes its temporary file and raises; the old file
is untouched, so the caller can simply try again later.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        # A full disk, say: give its blocks back; the old file stays as it was.
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every file system can fsync a directory
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_json_atomically(path: Path, document: object) -> None:
    """`document` as indented, key-sorted JSON (readable and diffable)."""
    write_atomically(path, json.dumps(document, indent=2, sort_keys=True).encode())
