"""The transport on both event loops tidemq runs (tidemq.common.event_loop).

The rest of the transport suite runs on pytest-asyncio's loop (asyncio's);
these run a server and a client on each loop, as `tidemq serve` and the
blocking client do. uvloop's transports are not asyncio.Transport instances,
which Connection once refused.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import pytest
from transport_helpers import RawPeer, echo

from tidemq.common import event_loop
from tidemq.common.tasks import TaskSet
from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.transport import Connection, RemotingClient, RemotingServer

pytest.importorskip("uvloop")

LOOPS = ["asyncio", "uvloop"]
ECHO = 40


@pytest.fixture(params=LOOPS)
def choice(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    loop: str = request.param
    monkeypatch.setenv(event_loop.ENV_VAR, loop)
    return loop


async def round_trips(loop_name: str) -> None:
    assert event_loop.loop_name() == loop_name
    server = RemotingServer("test", {ECHO: echo()}, host="127.0.0.1", port=0)
    await server.start()
    client = RemotingClient()
    try:
        address = f"127.0.0.1:{server.port}"
        answers = await asyncio.gather(
            *(
                client.invoke(address, RemotingCommand.request(ECHO, {"i": str(i)}, b"x" * i))
                for i in range(200)
            )
        )
        assert [a.ext_fields["i"] for a in answers] == [str(i) for i in range(200)]
        assert [len(a.body) for a in answers] == list(range(200))
        [connection] = server.connections
        assert connection.remote[0] == "127.0.0.1"
        assert connection.in_flight == 0
        # Nagle off at both ends on both loops (asyncio leaves it on for accepted sockets).
        for end in (connection, *client.connections.values()):
            sock = end._transport.get_extra_info("socket")  # type: ignore[union-attr]
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0

        # A peer speaking garbage is cut off; the server keeps serving.
        peer = await RawPeer.open(server.port)
        await peer.send(b"\x00\x00\x00\x10\x00\x00\x00\x05[1,2]" + b"\x00" * 8)
        assert await peer.wait_eof() == b""
        await peer.close()
        answer = await client.invoke(address, RemotingCommand.request(ECHO, body=b"after"))
        assert (answer.code, answer.body) == (ResponseCode.SUCCESS, b"after")
    finally:
        await client.close()
        await server.stop(grace=1.0)
    assert server.connections == frozenset()


def test_requests_and_answers(choice: str) -> None:
    event_loop.run(round_trips(choice))


async def signal_and_executor() -> tuple[str, str]:
    loop = asyncio.get_running_loop()
    got = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, got.set)
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(got.wait(), 5)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    threaded = await asyncio.to_thread(lambda: "thread")
    executor = await loop.run_in_executor(None, lambda: "executor")
    return threaded, executor


def test_signal_handlers_and_executors(choice: str) -> None:
    assert event_loop.run(signal_and_executor()) == ("thread", "executor")


def test_a_connection_refuses_a_datagram_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
        )
        try:
            with pytest.raises(TypeError, match="stream transport"):
                Connection(echo(), TaskSet("t")).connection_made(transport)
        finally:
            transport.close()

    monkeypatch.setenv(event_loop.ENV_VAR, "uvloop")
    event_loop.run(check())
