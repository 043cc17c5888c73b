"""Processes for the ali-ons interop tests: a real `tidemq serve`, the `tidemq` CLI and
the Node scenario scripts in `js/`.

Every wait here is bounded by a deadline; nothing sleeps as a condition. Each process
is reaped and its pipes drained and closed, so no ResourceWarning escapes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).resolve().parent / "js"
NODE_MODULES = REPO / "interop" / "node_modules"
ALI_ONS_PACKAGE = NODE_MODULES / "ali-ons" / "package.json"

READY_LINE = re.compile(
    r"^tidemq ready namesrv=(?P<namesrv>\S+) broker=(?P<broker>\S+)(?: grpc=(?P<grpc>\S+))?\s*$"
)
SERVER_START_TIMEOUT = 30.0
SERVER_STOP_TIMEOUT = 10.0
CLI_TIMEOUT = 30.0

Event = dict[str, Any]
T = TypeVar("T")


def unique(prefix: str) -> str:
    """A topic or group name no other test (or earlier run on the same data) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _tail(lines: Sequence[str], count: int = 40) -> str:
    return "\n".join(lines[-count:])


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _drain(stream: IO[str], sink: Callable[[str], None], done: Callable[[], None]) -> None:
    try:
        for line in stream:
            sink(line.rstrip("\n"))
    except ValueError:  # the stream was closed under us during teardown
        pass
    finally:
        done()


@dataclass(frozen=True)
class CliResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"`tidemq {' '.join(self.args)}` exited {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


class TidemqServer:
    """`python -m tidemq.cli.main serve` on ephemeral ports, in its own data dir."""

    def __init__(
        self, data_dir: Path, *, verbose: bool = False, extra_args: Sequence[str] = ()
    ) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"
        self._log = self.log_path.open("w", encoding="utf-8")
        self._stdout_lines: list[str] = []
        self._cond = threading.Condition()
        self._stdout_closed = False
        command = [sys.executable, "-m", "tidemq.cli.main"]
        if verbose:
            command.append("--verbose")
        command += [
            "serve",
            "--data-dir",
            str(data_dir),
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
            "--grpc-port",
            "0",
            *extra_args,
        ]
        self.command = command
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            encoding="utf-8",
            errors="replace",
            cwd=REPO,
            env=_python_env(),
        )
        assert self.proc.stdout is not None
        self._reader = threading.Thread(
            target=_drain,
            args=(self.proc.stdout, self._on_line, self._on_eof),
            name="tidemq-serve-stdout",
            daemon=True,
        )
        self._reader.start()
        self.namesrv = ""
        self.broker = ""
        self.grpc = ""

    def _on_line(self, line: str) -> None:
        with self._cond:
            self._stdout_lines.append(line)
            self._cond.notify_all()

    def _on_eof(self) -> None:
        with self._cond:
            self._stdout_closed = True
            self._cond.notify_all()

    def wait_ready(self, timeout: float = SERVER_START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self._stdout_lines:
                    match = READY_LINE.match(line)
                    if match:
                        self.namesrv = match["namesrv"]
                        self.broker = match["broker"]
                        self.grpc = match["grpc"] or ""
                        return
                remaining = deadline - time.monotonic()
                if self._stdout_closed or remaining <= 0:
                    break
                self._cond.wait(remaining)
        why = "exited" if self._stdout_closed else f"printed no ready line within {timeout:.0f} s"
        self.stop()
        pytest.fail(
            f"`{' '.join(self.command)}` {why} (exit code {self.proc.returncode}); expected a "
            f"line `tidemq ready namesrv=HOST:PORT broker=HOST:PORT`.\n{self.describe()}",
            pytrace=False,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, count: int = 60) -> str:
        self._log.flush()
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return _tail(lines, count)

    def describe(self) -> str:
        with self._cond:
            stdout = _tail(self._stdout_lines, 20)
        return (
            f"--- tidemq serve stdout (tail)\n{stdout}\n"
            f"--- tidemq serve log {self.log_path} (tail)\n{self.log_tail()}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(SERVER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(SERVER_STOP_TIMEOUT)
        self._reader.join(SERVER_STOP_TIMEOUT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def cli(self, *args: str, timeout: float = CLI_TIMEOUT) -> CliResult:
        """Runs `tidemq ARGS...` (a separate process), returning its output."""
        try:
            done = subprocess.run(
                [sys.executable, "-m", "tidemq.cli.main", *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                cwd=REPO,
                env=_python_env(),
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"`tidemq {' '.join(args)}` did not finish within {timeout:.0f} s\n"
                f"{self.describe()}",
                pytrace=False,
            )
        return CliResult(tuple(args), done.returncode, done.stdout, done.stderr)

    def create_topic(self, topic: str, queues: int = 4, auth: Sequence[str] = ()) -> None:
        """`auth`: the CLI's --access-key/--secret-key options, for a server with ACLs."""
        result = self.cli(
            "topic", "create", topic, "--queues", str(queues), "--namesrv", self.namesrv, *auth
        )
        if result.returncode != 0:
            pytest.fail(f"creating topic {topic} failed: {result.describe()}", pytrace=False)

    def stored(self, topic: str, auth: Sequence[str] = ()) -> int:
        """Messages stored in `topic` (the sum of its queues' max offsets), read with the CLI."""
        result = self.cli("topic", "status", topic, "--json", "--namesrv", self.namesrv, *auth)
        if result.returncode != 0:
            pytest.fail(f"reading topic {topic} failed: {result.describe()}", pytrace=False)
        return sum(int(queue["max_offset"]) for queue in json.loads(result.stdout))


class NodeScript:
    """One scenario script (`js/<name>.js`) running under node, its JSON lines collected."""

    def __init__(self, node: str, name: str, args: Sequence[str], *, server: TidemqServer) -> None:
        self.name = name
        self.server = server
        self.events: list[Event] = []
        self.bad_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self._cond = threading.Condition()
        self._open_streams = 2
        env = dict(os.environ)
        env["NODE_PATH"] = str(NODE_MODULES)
        env["TIDEMQ_NAMESRV"] = server.namesrv
        self.command = [node, str(JS_DIR / f"{name}.js"), *args]
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            cwd=REPO,
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(
                target=_drain,
                args=(self.proc.stdout, self._on_stdout, self._on_eof),
                name=f"{name}-stdout",
                daemon=True,
            ),
            threading.Thread(
                target=_drain,
                args=(self.proc.stderr, self._on_stderr, self._on_eof),
                name=f"{name}-stderr",
                daemon=True,
            ),
        ]
        for reader in self._readers:
            reader.start()

    # -- output collection -------------------------------------------------------------
    def _on_stdout(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        with self._cond:
            if isinstance(event, dict) and "event" in event:
                self.events.append(event)
            else:
                self.bad_lines.append(line)
            self._cond.notify_all()

    def _on_stderr(self, line: str) -> None:
        with self._cond:
            self.stderr_lines.append(line)

    def _on_eof(self) -> None:
        with self._cond:
            self._open_streams -= 1
            self._cond.notify_all()

    def of_kind(self, kind: str) -> list[Event]:
        with self._cond:
            return [event for event in self.events if event["event"] == kind]

    # -- waiting -----------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        pytest.fail(f"{message}\n{self.describe()}", pytrace=False)

    def wait_for(
        self, what: str, predicate: Callable[[list[Event]], T | None], timeout: float
    ) -> T:
        """Waits until `predicate(events)` is truthy and returns it; fails on a deadline,
        on the script's end, or on a `fatal`/`timeout` event from the script."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate(list(self.events))
                if result:
                    return result
                ended = [e for e in self.events if e["event"] in ("fatal", "timeout")]
                remaining = deadline - time.monotonic()
                if ended or self._open_streams == 0 or remaining <= 0:
                    break
                self._cond.wait(min(remaining, 1.0))
        if ended:
            self.fail(f"{self.name}: script gave up while waiting for {what}: {ended[0]}")
        if remaining <= 0:
            self.fail(f"{self.name}: no {what} within {timeout:.0f} s")
        self.fail(f"{self.name}: script ended before {what}")

    def stop(self) -> None:
        """Asks a script that waits for it (retry.js --mode always) to finish."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def wait_exit(self, timeout: float) -> list[Event]:
        """Waits for the script to end and checks it ended well (`done`, exit code 0)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.close()
            self.fail(f"{self.name}: script still running after {timeout:.0f} s (killed)")
        self._join()
        if self.proc.returncode != 0 or not self.of_kind("done"):
            self.fail(f"{self.name}: script exited {self.proc.returncode} without success")
        return list(self.events)

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(5.0)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10.0)
        self._join()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()

    # -- reporting ---------------------------------------------------------------------
    def describe(self) -> str:
        with self._cond:
            events = [json.dumps(_short_event(e)) for e in self.events]
            bad = list(self.bad_lines)
            stderr = list(self.stderr_lines)
        parts = [
            f"--- {self.name}: {' '.join(self.command)} (exit {self.proc.poll()})",
            f"--- events (last 60 of {len(events)})",
            _tail(events, 60),
        ]
        if bad:
            parts += ["--- non-JSON stdout", _tail(bad, 20)]
        parts += ["--- stderr (tail)", _tail(stderr, 40), self.server.describe()]
        return "\n".join(parts)


def _short_event(event: Event) -> Event:
    """The event without the long base64 body, for failure reports."""
    return {k: v for k, v in event.items() if k != "bodyB64"}


class ScriptRunner:
    """Starts scenario scripts against one server and reaps them at the end of a test."""

    def __init__(self, node: str, server: TidemqServer) -> None:
        self.node = node
        self.server = server
        self.started: list[NodeScript] = []

    def start(self, name: str, *, timeout: float, **options: str | int) -> NodeScript:
        args = ["--namesrv", self.server.namesrv, "--timeout-ms", str(int(timeout * 1000))]
        for key, value in options.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        script = NodeScript(self.node, name, args, server=self.server)
        self.started.append(script)
        return script

    def run(self, name: str, *, timeout: float, **options: str | int) -> NodeScript:
        """Runs a script to its end (its own hard timeout is `timeout`)."""
        script = self.start(name, timeout=timeout, **options)
        script.wait_exit(timeout + 10.0)
        return script

    def close(self) -> None:
        for script in self.started:
            script.close()


def consume_both(
    scripts: ScriptRunner, topic: str, group: str, timeout: float, **credentials: str
) -> None:
    """The `acl` script consumes `topic` as `group` until both of its producer's
    messages (acl-0, acl-1) are received, then stops."""
    consumer = scripts.start(
        "acl", timeout=timeout, mode="consume", topic=topic, group=group, **credentials
    )
    consumer.wait_for(
        "both deliveries",
        lambda events: (
            {e["label"] for e in events if e["event"] == "received"} >= {"acl-0", "acl-1"}
        ),
        timeout,
    )
    consumer.stop()
    consumer.wait_exit(timeout)
