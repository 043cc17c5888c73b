"""A remoting client that reaches a port speaking another protocol fails at
once, naming the protocol, instead of waiting out its timeout or reporting a
bare "connection lost"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from tidemq.protocol import RemotingCommand, RequestCode
from tidemq.testing.waiting import HANG_GUARD_S
from tidemq.transport import RemotingClient, RemotingForeignProtocolError

SETTINGS = bytes.fromhex("000018040000000000000400400000000500400000000600004000fe0300000001")

Server = Callable[[bytes, bool], Awaitable[int]]


@pytest.fixture
async def foreign_server() -> AsyncIterator[Server]:
    """Start a TCP server that writes `opening` when a client connects (and
    closes after the first read, if `close` is set); returns its port."""
    servers: list[asyncio.Server] = []
    handlers: set[asyncio.Task[None]] = set()

    async def start(opening: bytes, close: bool) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                handlers.add(task)
            try:
                writer.write(opening)
                await writer.drain()
                await reader.read(65536)
                if not close:
                    await reader.read()  # hold the connection until the client goes
            except ConnectionError:
                pass
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
    if handlers:  # each ends once its client has gone (every test closes its client)
        await asyncio.wait(handlers, timeout=10)


@pytest.mark.parametrize("close", [True, False])
async def test_an_http2_port_fails_the_request_at_once(foreign_server: Server, close: bool) -> None:
    port = await foreign_server(SETTINGS, close)
    async with RemotingClient() as client:
        with pytest.raises(RemotingForeignProtocolError) as caught:
            # The call's own timeout is an hour away: waiting it out trips the hang guard.
            async with asyncio.timeout(HANG_GUARD_S):
                await client.invoke(
                    f"127.0.0.1:{port}",
                    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
                    timeout=3600,
                )
    assert caught.value.protocol == "HTTP/2"
    assert "HTTP/2" in str(caught.value)


async def test_a_tls_port_is_named(foreign_server: Server) -> None:
    port = await foreign_server(bytes([21, 3, 3, 0, 2, 2, 40]), True)
    async with RemotingClient() as client:
        with pytest.raises(RemotingForeignProtocolError) as caught:
            await client.invoke(
                f"127.0.0.1:{port}", RemotingCommand.request(RequestCode.HEART_BEAT), timeout=30
            )
    assert caught.value.protocol == "TLS"
