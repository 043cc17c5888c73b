"""The figures the mode-comparing benchmarks report (security_bench,
metrics_bench, grpc_tls_bench): msgs/s and the CPU per message of this
process (the client, all its threads) and of the server process, which stay
comparable when other work shares the cores; and the median run of a mode.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def server_cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    """User + system CPU seconds this process used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True, slots=True)
class Start:
    """The clocks when a timed piece of work began."""

    server_pid: int
    wall_s: float
    client_s: float
    server_s: float

    @classmethod
    def now(cls, server_pid: int) -> Start:
        return cls(server_pid, time.perf_counter(), client_cpu_s(), server_cpu_s(server_pid))

    def figures(self, count: int) -> dict[str, float]:
        """msgs/s and CPU us per message of `count` messages handled since the start."""
        seconds = time.perf_counter() - self.wall_s
        client_s = client_cpu_s() - self.client_s
        server_s = server_cpu_s(self.server_pid) - self.server_s
        return {
            "msgs_per_s": round(count / seconds),
            "client_us_per_msg": round(1e6 * client_s / count, 1),
            "server_us_per_msg": round(1e6 * server_s / count, 1),
        }


def median_run(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A copy of the run with the median msgs/s."""
    ordered = sorted(runs, key=lambda r: r["msgs_per_s"])
    return dict(ordered[len(ordered) // 2])
