"""A real `tidemq serve` short of file descriptors, holding idle connections, or fed
partial 16 MiB frames: it keeps (or resumes) acknowledging sends, loses no
acknowledged message, keeps its log small and its memory bounded (issue #14,
hazards 3 and 6).

File descriptors: the server starts with its normal limit, then
`prlimit --pid` lowers its soft limit to a few above what it uses; idle raw
connections take the rest. Conditions are polled with deadlines; every load
loop is bounded in count and time; every process and socket is closed in a
`finally`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import resource
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq import Producer, make_message
from tidemq.client.errors import ClientError
from tidemq.protocol import SerializeType
from tidemq.protocol.frame import MAX_FRAME_SIZE, frame_prefix
from tidemq.testing.client_support import read_topic
from tidemq.testing.processes import ServerProcess, serve, serve_args, server_env
from tidemq.testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc"),
]

MiB = 1024 * 1024
PRLIMIT = shutil.which("prlimit")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def log_lines(server: ServerProcess) -> list[str]:
    return server.stderr().splitlines()


@contextlib.contextmanager
def raw_connections(address: str, count: int) -> Iterator[list[socket.socket]]:
    """Up to `count` idle TCP connections (fewer if connecting fails); all closed after."""
    host, port = address.rsplit(":", 1)
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.settimeout(5)
            try:
                sock.connect((host, int(port)))
            except OSError:
                sock.close()
                break
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


class Ledger:
    """Sends numbered messages; keeps what was acknowledged SEND_OK, where it landed."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.acked: dict[tuple[int, int], bytes] = {}
        self.sent = 0

    def send(self) -> bool:
        body = f"message-{self.sent}".encode()
        self.sent += 1
        try:
            result = self.producer.send(make_message(self.topic, body))
        except ClientError:
            return False
        if result.status != "SEND_OK":
            return False
        self.acked[(result.queue_id, result.queue_offset)] = body
        return True

    def check_readable(self, namesrv: str) -> None:
        found = asyncio.run(read_topic(namesrv, self.topic))
        stored = {(m.queue_id, m.queue_offset): m.body for m in found}
        missing = {key: body for key, body in self.acked.items() if stored.get(key) != body}
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {list(missing)[:5]}"


@pytest.mark.skipif(PRLIMIT is None, reason="needs prlimit (util-linux)")
def test_running_out_of_file_descriptors_is_survived(tmp_path: Path) -> None:
    assert PRLIMIT is not None
    data = tmp_path / "data"
    with serve(data, flush="sync") as server:
        pid = server.popen.pid
        assert "open files: soft" in server.stderr()
        with Producer("FdProducer", namesrv=server.namesrv, send_timeout_s=3) as producer:
            ledger = Ledger(producer, "FdTopic")
            for _ in range(20):
                assert ledger.send(), "sends work before the starvation"
            # the lowest soft limit that leaves the server a few descriptors
            soft = open_fds(pid) + 20
            subprocess.run([PRLIMIT, f"--pid={pid}", f"--nofile={soft}:{soft}"], check=True)
            with raw_connections(server.broker, soft + 40) as idle:
                assert len(idle) > 20
                wait_until(
                    lambda: open_fds(pid) >= soft - 1, "the server to run out of descriptors"
                )
                starved_until = time.monotonic() + 30
                sends = 0
                # Sends keep data dirty until the periodic checkpoint (about once a
                # second) fails to open its file; bounded by count and time.
                while time.monotonic() < starved_until and sends < 50_000:
                    ledger.send()  # may fail or time out: allowed while starved
                    sends += 1
                    if "flush failed (EMFILE" in server.stderr() and sends >= 50:
                        break
                assert "flush failed (EMFILE" in server.stderr(), "the checkpoint never starved"
                assert server.popen.poll() is None
            # the idle connections are closed: sends must be acknowledged again
            wait_until(ledger.send, "a send to be acknowledged after the starvation")
            assert all(ledger.send() for _ in range(20))
        with Producer("FdProducer2", namesrv=server.namesrv) as fresh:  # new connections
            assert fresh.send(make_message("FdTopic", b"fresh")).status == "SEND_OK"
        assert server.popen.poll() is None, "the server died"
        ledger.check_readable(server.namesrv)
        lines = log_lines(server)
        assert not any("out of system resource" in line for line in lines)
        assert len(lines) < 150, "\n".join(lines[:60])
        wait_until(lambda: "flush recovered" in server.stderr(), "the recovery line")
        assert server.stop() == 0
    with serve(data, flush="sync", name="restarted") as again:
        ledger.check_readable(again.namesrv)


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    with serve(tmp_path / "data", settings={"connection_max_idle_s": 1.5}) as server:
        with Producer("IdleProducer", namesrv=server.namesrv) as producer:
            assert producer.send(make_message("IdleTopic", b"first")).status == "SEND_OK"
            started = time.monotonic()
            with raw_connections(server.broker, 5) as idle:
                assert len(idle) == 5
                for sock in idle:
                    sock.settimeout(30)
                    assert sock.recv(1) == b"", "the server closes an idle connection"
                assert time.monotonic() - started >= 1.5
            # the producer's own connection went idle too: the next send reconnects
            assert producer.send(make_message("IdleTopic", b"second")).status == "SEND_OK"
        assert server.popen.poll() is None


async def grpc_channel_goes_idle(endpoint: str) -> float:
    """Seconds from a finished RPC until the server ends the idle connection
    (GOAWAY: the channel leaves READY); a new RPC still works after it."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = spb.QueryRouteRequest(topic=pb.Resource(name="IdleTopic"))
        await stub.QueryRoute(request, timeout=10)
        assert channel.get_state() is grpc.ChannelConnectivity.READY
        started = time.monotonic()
        await asyncio.wait_for(
            channel.wait_for_state_change(grpc.ChannelConnectivity.READY), timeout=30
        )
        idle_after = time.monotonic() - started
        answer = await stub.QueryRoute(request, timeout=10)
        assert answer.status.code == pb.Code.TOPIC_NOT_FOUND  # answered: reconnected
        return idle_after


def test_idle_grpc_connections_are_closed(tmp_path: Path) -> None:
    with serve(tmp_path / "data", settings={"connection_max_idle_s": 1.5}) as server:
        assert asyncio.run(grpc_channel_goes_idle(server.grpc)) >= 1.0
        assert server.popen.poll() is None


@contextlib.contextmanager
def frame_hogs(address: str, count: int, body_bytes: int) -> Iterator[list[int]]:
    """`count` connections, each sending the prefix of a 16 MiB frame and then up to
    `body_bytes` of it without blocking, until all is sent, nothing moves for 2 s, or
    30 s pass; they stay open (the frames incomplete) until the `with` ends.
    Yields the bytes each one got out."""
    host, port = address.rsplit(":", 1)
    prefix = frame_prefix(SerializeType.JSON, 10, MAX_FRAME_SIZE - 14)
    chunk = bytes(256 * 1024)
    sockets: list[socket.socket] = []
    sent = [0] * count
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
            sock.connect((host, int(port)))
            sock.sendall(prefix)
            sock.setblocking(False)
            sockets.append(sock)
        deadline = time.monotonic() + 30
        last_progress = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_progress < 2:
            pending = [s for i, s in enumerate(sockets) if sent[i] < body_bytes]
            if not pending:
                break
            _, writable, _ = select.select([], pending, [], 0.2)
            for sock in writable:
                index = sockets.index(sock)
                try:
                    sent[index] += sock.send(chunk[: body_bytes - sent[index]])
                    last_progress = time.monotonic()
                except BlockingIOError:
                    continue
        yield sent
    finally:
        for sock in sockets:
            sock.close()


def test_partial_frames_stay_within_the_frame_budget(tmp_path: Path) -> None:
    budget = 64 * MiB
    settings = {"frame_buffer_budget_bytes": budget}
    with serve(tmp_path / "data", settings=settings) as server:
        pid = server.popen.pid
        with Producer("FrameProducer", namesrv=server.namesrv) as producer:
            ledger = Ledger(producer, "FrameTopic")
            for _ in range(20):
                assert ledger.send()
            baseline = status_kib(pid, "VmRSS")
            with contextlib.suppress(OSError):  # reset the peak (VmHWM) to now
                Path(f"/proc/{pid}/clear_refs").write_text("5")
            with frame_hogs(server.broker, 40, 12 * MiB) as sent:
                assert sum(sent) > 2 * 12 * MiB, "the server read nothing"
                for _ in range(20):
                    assert ledger.send(), "a producer is served while frames are held"
                peak = status_kib(pid, "VmHWM")
        growth_mib = (peak - baseline) / 1024
        assert growth_mib < budget / MiB + 48, f"RSS grew {growth_mib:.0f} MiB"
        ledger.check_readable(server.namesrv)
        assert server.popen.poll() is None


@contextlib.contextmanager
def under_soft_limit(
    args: list[str], soft: int, home: Path, name: str
) -> Iterator[tuple[dict[str, str], Path]]:
    """`tidemq ARGS` started by prlimit with a soft open-files limit of `soft`:
    the ready line's fields and the stderr file; killed on the way out."""
    assert PRLIMIT is not None
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    stderr = home / f"{name}.err"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [PRLIMIT, f"--nofile={soft}:{hard}", sys.executable, "-m", "tidemq.cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=server_env(home),
            text=True,
        )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(x) for x in process.stdout], daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{name}: no ready line; {stderr.read_text()}") from None
            if line.startswith("tidemq ready "):
                yield dict(item.split("=", 1) for item in line.split()[2:]), stderr
                return
    finally:
        process.kill()
        process.wait(timeout=30)
        reader.join(timeout=30)
        process.stdout.close()


@pytest.mark.skipif(PRLIMIT is None, reason="needs prlimit (util-linux)")
def test_every_server_command_raises_its_soft_open_files_limit(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")
    expected = f"open files: soft 256 -> {hard} (hard {hard})"
    with under_soft_limit(["namesrv", "--port", "0"], 256, tmp_path, "namesrv") as (ready, err):
        assert expected in err.read_text()
        config = tmp_path / "broker.json"
        config.write_text(
            json.dumps(
                {
                    "listen_port": 0,
                    "namesrv_addrs": [ready["namesrv"]],
                    "data_dir": str(tmp_path / "broker"),
                }
            )
        )
        with under_soft_limit(["broker", "--config", str(config)], 256, tmp_path, "broker") as (
            _,
            broker_err,
        ):
            assert expected in broker_err.read_text()
    with under_soft_limit(serve_args(tmp_path / "serve"), 256, tmp_path, "serve") as (_, err):
        assert expected in err.read_text()
