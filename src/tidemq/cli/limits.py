"""The servers raise their soft open-files limit to the hard limit, and say so.

A broker needs a descriptor per connection and per open store file
(commitlog, consumequeue and index files stay open while mapped), plus one
for every checkpoint or config it rewrites. Many systems start processes
with a soft limit of 1024 while the hard limit allows far more; running out
stops accepting connections and writing checkpoints. Raising the soft
limit is what any process may do on its own (RocketMQ's start scripts ask
for ``ulimit -n`` in their docs instead). Both numbers go to stderr at start,
so a log shows what the server ran with.
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass

import click

log = logging.getLogger(__name__)

GetLimit = Callable[[int], tuple[int, int]]
SetLimit = Callable[[int, tuple[int, int]], None]


@dataclass(frozen=True)
class OpenFiles:
    before: int
    soft: int
    hard: int
    problem: str | None = None
    """Why the soft limit could not be raised, if it could not."""

    def describe(self) -> str:
        hard = "unlimited" if self.hard == resource.RLIM_INFINITY else str(self.hard)
        soft = "unlimited" if self.soft == resource.RLIM_INFINITY else str(self.soft)
        change = f"soft {self.before} -> {soft}" if self.soft != self.before else f"soft {soft}"
        problem = f"; could not raise it: {self.problem}" if self.problem else ""
        return f"open files: {change} (hard {hard}){problem}"


def adjust_open_files(
    getrlimit: GetLimit = resource.getrlimit, setrlimit: SetLimit = resource.setrlimit
) -> OpenFiles:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit (the calls are injectable)."""
    soft, hard = getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or (hard != resource.RLIM_INFINITY and soft >= hard):
        return OpenFiles(soft, soft, hard)
    try:
        setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. macOS refuses an unlimited soft limit
        return OpenFiles(soft, soft, hard, str(exc))
    return OpenFiles(soft, hard, hard)


def raise_open_files_limit() -> OpenFiles:
    """Raise the limit and report both numbers on stderr (and in the log)."""
    limits = adjust_open_files()
    line = limits.describe()
    click.echo(f"tidemq: {line}", err=True)
    log.info("%s", line)
    return limits
