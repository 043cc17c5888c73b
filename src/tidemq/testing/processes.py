"""Server subprocesses for integration tests and benchmarks.

A :class:`ServerProcess` runs ``python -m tidemq.cli.main ARGS`` with its
stdout read line by line in a thread (so the pipe never fills) and stderr in
a log file, and waits for the ``tidemq ready key=value ...`` line the server
commands print. :func:`serve` starts a standalone ``tidemq serve`` on free
ports in a given data directory. Always stop or kill what you start (use the
context manager).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tidemq.transport.ports import free_port as free_port  # re-exported: tests start servers on it

READY_DEADLINE_S = 30.0
STOP_DEADLINE_S = 30.0

FAST_DELAY_LEVELS = "1s 1s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"
"""Every delay level short (level 3, the first retry, is 1 s): retries land fast."""


def server_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TIDEMQ_HOME"] = str(home)
    env.pop("TIDEMQ_NAMESRV", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ServerProcess:
    """A `tidemq` server subprocess whose stdout is read line by line in a thread."""

    def __init__(self, args: list[str], home: Path, log: Path) -> None:
        self.args = list(args)
        self.home = home
        self.log = log
        self.ready: dict[str, str] = {}
        self._log_file: IO[bytes] = log.open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tidemq.cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=server_env(home),
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_ready(self, deadline_s: float = READY_DEADLINE_S) -> dict[str, str]:
        """The key=value fields of the `tidemq ready ...` line (also kept in `ready`)."""
        deadline = time.monotonic() + deadline_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no ready line in time; stderr:\n{self.stderr()}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(
                    f"exited with {self.popen.wait()} before ready:\n"
                    f"{''.join(self.output)}\n{self.stderr()}"
                )
            self.output.append(line)
            if line.startswith("tidemq ready "):
                self.ready = dict(item.split("=", 1) for item in line.split()[2:])
                return self.ready

    @property
    def namesrv(self) -> str:
        return self.ready["namesrv"]

    @property
    def broker(self) -> str:
        return self.ready["broker"]

    @property
    def grpc(self) -> str:
        """The gRPC endpoint ("host:port") of a `serve` process."""
        return self.ready["grpc"]

    @property
    def http(self) -> str:
        """The HTTP endpoint ("host:port": /metrics, /api, the dashboard), with --http-port."""
        return self.ready["http"]

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run `tidemq ARGS --namesrv <this server's>` to its end, in this server's
        environment (its TIDEMQ_HOME), output captured as text."""
        return subprocess.run(
            [sys.executable, "-m", "tidemq.cli.main", *args, "--namesrv", self.namesrv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=server_env(self.home),
        )

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit code."""
        self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"did not exit in time; stderr:\n{self.stderr()}") from None

    def kill(self) -> None:
        """Kill if still running, then release the pipes and the log file."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=STOP_DEADLINE_S)
        self._reader.join(timeout=STOP_DEADLINE_S)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self._log_file.close()

    def stderr(self) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")


@contextmanager
def started(
    args: list[str], home: Path, name: str
) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    """Start a server, wait for its ready line, kill it on the way out."""
    process = ServerProcess(args, home, home / f"{name}.log")
    try:
        yield process, process.wait_ready()
    finally:
        process.kill()


def serve_args(
    data_dir: Path,
    *,
    flush: str = "async",
    settings: Mapping[str, object] | None = None,
    namesrv_port: int = 0,
    broker_port: int = 0,
    http: bool = False,
) -> list[str]:
    """`tidemq serve` on free ports (gRPC included; the HTTP endpoint with `http`)."""
    args = [
        "serve",
        "--data-dir",
        str(data_dir),
        "--namesrv-port",
        str(namesrv_port),
        "--broker-port",
        str(broker_port),
        "--flush",
        flush,
        "--grpc-port",
        "0",
    ]
    if http:
        args += ["--http-port", "0"]
    for key, value in (settings or {}).items():
        args += ["--set", f"{key}={value}"]
    return args


@contextmanager
def serve(
    data_dir: Path,
    *,
    flush: str = "async",
    settings: Mapping[str, object] | None = None,
    name: str = "serve",
    http: bool = False,
) -> Iterator[ServerProcess]:
    """A standalone `tidemq serve` on free ports; `.namesrv` and `.broker` are
    its addresses (`.http` too with `http`: /metrics, the API, the dashboard)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    args = serve_args(data_dir, flush=flush, settings=settings, http=http)
    with started(args, data_dir.parent, name) as (process, _):
        yield process
