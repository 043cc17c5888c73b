"""The server's C allocator settings (tidemq.server.allocator)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tidemq.server.allocator import allocator_choice, keep_freed_heap


def test_default_changes_nothing() -> None:
    assert keep_freed_heap({"TIDEMQ_MALLOC": "default"}) is False


@pytest.mark.parametrize("value", ["jemalloc", "", "1"])
def test_an_unknown_choice_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValueError, match="TIDEMQ_MALLOC"):
        allocator_choice({"TIDEMQ_MALLOC": value})


def test_freed_buffers_stay_in_the_process_with_the_server_settings() -> None:
    """Forty 1 MiB buffers allocated, touched and freed, three times over: with
    the server settings the third round reuses the memory (almost no fresh
    pages); with glibc's own, the freed heap top was handed back and is
    faulted in again. Counted as minor page faults in a child process, so
    this one's heap is left alone."""
    probe = (
        "import resource, sys\n"
        "from tidemq.server.allocator import keep_freed_heap\n"
        "applied = keep_freed_heap({'TIDEMQ_MALLOC': sys.argv[1]})\n"
        "def round_trip():\n"
        "    buffers = [bytearray(1 << 20) for _ in range(40)]\n"
        "    del buffers\n"
        "round_trip(); round_trip()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "round_trip()\n"
        "print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    results = {}
    for choice in ("server", "default"):
        out = subprocess.run(
            [sys.executable, "-c", probe, choice], capture_output=True, text=True, check=True
        ).stdout.split()
        results[choice] = (out[0] == "True", int(out[1]))
    applied, kept_faults = results["server"]
    if not applied:
        pytest.skip("not glibc: nothing to set")
    pages = 40 * (1 << 20) // 4096
    assert kept_faults < pages // 10, results  # reused: almost no fresh pages
    assert results["default"][1] > pages // 2, results  # handed back and faulted in again
