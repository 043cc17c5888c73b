"""The C allocator's settings for a server process: keep freed heap memory.

A broker allocates and frees buffers of hundreds of kilobytes for every
batch it receives and every pull it answers (a SEND_BATCH frame, its
records, a pull response). glibc hands such buffers back to the kernel as
soon as they are freed: large ones are separate mappings, and the top of
the heap is trimmed once more than a few hundred kilobytes of it are free.
The next request then faults in fresh, zeroed pages again. Under a batch
produce load that page-fault and brk/munmap traffic was a third of the
broker's CPU (perf: do_anonymous_page, __do_sys_brk, munmap), and more on
a virtual machine, where a fresh page can also cost the host a fault.

Two `mallopt` settings keep that memory in the process instead:

- `M_MMAP_THRESHOLD` 8 MiB: buffers below it come from the heap, so a
  freed one is reused by the next request (glibc otherwise maps anything
  over 128 KiB separately, and adjusts that threshold as it goes);
- `M_TRIM_THRESHOLD` 64 MiB: the heap is shrunk only when more than that
  is free at its top.

The broker's resident memory may stay up to that much higher after a burst
(its mapped store files, the bulk of its memory, are not affected).
`TIDEMQ_MALLOC=default` keeps glibc's own settings; on a C library other
than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Mapping

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameter numbers (malloc.h)."""
SERVER_MMAP_THRESHOLD = 8 << 20
SERVER_TRIM_THRESHOLD = 64 << 20


def allocator_choice(environ: Mapping[str, str] | None = None) -> str:
    """ "server" or "default" from TIDEMQ_MALLOC (unset: "server"); ValueError otherwise."""
    env = os.environ if environ is None else environ
    choice = env.get("TIDEMQ_MALLOC", "server").strip().lower()
    if choice not in ("server", "default"):
        raise ValueError(f"TIDEMQ_MALLOC={choice!r}: expected 'server' or 'default'")
    return choice


def keep_freed_heap(environ: Mapping[str, str] | None = None) -> bool:
    """Apply the server settings; False when TIDEMQ_MALLOC=default or the C
    library is not glibc (nothing changed)."""
    if allocator_choice(environ) == "default":
        return False
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    return bool(
        mallopt(M_MMAP_THRESHOLD, SERVER_MMAP_THRESHOLD)
        and mallopt(M_TRIM_THRESHOLD, SERVER_TRIM_THRESHOLD)
    )


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        version = libc.gnu_get_libc_version  # glibc only
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
