"""Real sockets on 127.0.0.1, port 0: servers, clients and raw peers, all closed after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import pytest
from transport_helpers import RawPeer

from tidemq.transport import Handler, RemotingClient, RemotingServer

ServerFactory = Callable[..., Awaitable[RemotingServer]]


@pytest.fixture
async def make_server() -> AsyncIterator[ServerFactory]:
    servers: list[RemotingServer] = []

    async def factory(handlers: Mapping[int, Handler], **options: object) -> RemotingServer:
        server = RemotingServer("test", handlers, host="127.0.0.1", port=0, **options)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield factory
    for server in servers:
        await server.stop(grace=1.0)


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., RemotingClient]]:
    clients: list[RemotingClient] = []

    def factory(**options: object) -> RemotingClient:
        client = RemotingClient(**options)  # type: ignore[arg-type]
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


@pytest.fixture
async def raw_peers() -> AsyncIterator[Callable[[int], Awaitable[RawPeer]]]:
    peers: list[RawPeer] = []

    async def factory(port: int) -> RawPeer:
        peer = await RawPeer.open(port)
        peers.append(peer)
        return peer

    yield factory
    for peer in peers:
        await peer.close()
