"""The TLS front with real sockets, certificates and a real grpc.aio server
behind it (an echo service on a private Unix socket, as the endpoint runs it):
plain and TLS on one permissive port, client verification, who grpc is told
the caller is, the connection bound, silent peers, big messages both ways
through the relay, and stopping. The same against `tidemq serve` processes
is in tests/integration/test_tls_grpc.py."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from tidemq.common import event_loop
from tidemq.grpc.relayed_peers import RelayedPeers
from tidemq.grpc.server import needs_front
from tidemq.grpc.tls_front import TlsFront, private_socket_path, remove_private_socket
from tidemq.testing.certs import CertSet, Pair
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfigError, TlsMode

ECHO = "/test.Echo/Echo"
MiB = 1024 * 1024


class Certs(CertSet):
    def channel_credentials(self, shown: Pair | None = None) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.cert.read_bytes(),
            private_key=shown.key.read_bytes() if shown else None,
            certificate_chain=shown.cert.read_bytes() if shown else None,
        )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


class Backend:
    """The grpc server behind a front: echoes, and records each call's peer as told."""

    def __init__(self, peers: RelayedPeers) -> None:
        self.peers = peers
        self.seen: list[str] = []
        self.path = private_socket_path()
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", 64 * MiB),
                ("grpc.max_send_message_length", 64 * MiB),
            ]
        )

        async def echo(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            self.seen.append(peers.real(context.peer()))
            return request

        handler = grpc.method_handlers_generic_handler(
            "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        self.server.add_generic_rpc_handlers((handler,))
        assert self.server.add_insecure_port(f"unix:{self.path}") != 0


FrontFactory = Callable[..., Awaitable[tuple[TlsFront, Backend]]]


@pytest.fixture
async def make_front() -> AsyncIterator[FrontFactory]:
    made: list[tuple[TlsFront, Backend]] = []

    async def factory(tls: ServerTls, **options: Any) -> tuple[TlsFront, Backend]:
        peers = RelayedPeers()
        backend = Backend(peers)
        await backend.server.start()
        front = TlsFront("test-front", "127.0.0.1", 0, tls, backend.path, peers, **options)
        await front.start()
        made.append((front, backend))
        return front, backend

    yield factory
    for front, backend in made:
        front.stop_accepting()
        await backend.server.stop(0)
        await front.stop(1.0)
        remove_private_socket(backend.path)


def channel(front: TlsFront, credentials: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
    target = f"127.0.0.1:{front.port}"
    options = [("grpc.max_receive_message_length", 64 * MiB)]
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, credentials, options=options)


async def echo(front: TlsFront, credentials: grpc.ChannelCredentials | None, body: bytes) -> bytes:
    """The echoed body; grpc.RpcError (UNAVAILABLE) when the connection is refused."""
    async with channel(front, credentials) as ch:
        call = ch.unary_unary(ECHO)
        result: bytes = await call(body, timeout=HANG_GUARD_S)
        return result


async def refused(front: TlsFront, credentials: grpc.ChannelCredentials | None) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await echo(front, credentials, b"refused?")
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


def test_only_what_grpc_cannot_do_goes_through_a_front(certs: Certs) -> None:
    assert not needs_front(ServerTls())
    assert not needs_front(certs.server_tls(TlsMode.ENFORCING))
    assert not needs_front(certs.server_tls(TlsMode.ENFORCING, ClientAuth.REQUIRE))
    assert needs_front(certs.server_tls(TlsMode.ENFORCING, ClientAuth.OPTIONAL))
    for verify in ClientAuth:
        assert needs_front(certs.server_tls(TlsMode.PERMISSIVE, verify))
    with pytest.raises(TlsConfigError, match="not disabled"):
        TlsFront("f", "127.0.0.1", 0, ServerTls(), "/nowhere", RelayedPeers())


async def test_permissive_serves_plain_and_tls_on_one_port_and_names_the_real_client(
    make_front: FrontFactory, certs: Certs
) -> None:
    front, backend = await make_front(certs.server_tls(TlsMode.PERMISSIVE))
    assert await echo(front, None, b"plain") == b"plain"
    assert await echo(front, certs.channel_credentials(), b"tls") == b"tls"
    # grpc saw the front's Unix socket; read through the book, the calls are 127.0.0.1's
    assert len(backend.seen) == 2
    assert all(peer.startswith("ipv4:127.0.0.1:") for peer in backend.seen), backend.seen
    assert backend.seen[0] != backend.seen[1]  # each connection its own client port
    await eventually(lambda: front.connections == 0, "both relays ended")
    assert len(front.peers) == 0
    assert front.refused == 0
    # what is left in the private directory is grpc's own socket, no per-connection names
    assert os.listdir(os.path.dirname(backend.path)) == ["grpc.sock"]


async def test_optional_client_certificates_in_enforcing_mode(
    make_front: FrontFactory, certs: Certs
) -> None:
    front, _ = await make_front(certs.server_tls(TlsMode.ENFORCING, ClientAuth.OPTIONAL))
    assert await echo(front, certs.channel_credentials(), b"no cert") == b"no cert"
    assert await echo(front, certs.channel_credentials(certs.client), b"cert") == b"cert"
    await refused(front, certs.channel_credentials(certs.stranger))
    await refused(front, None)  # plain, in enforcing
    assert front.refused >= 2


async def test_required_client_certificates_in_permissive_mode(
    make_front: FrontFactory, certs: Certs
) -> None:
    """RocketMQ's permissive: verification applies to the TLS connections; plain
    ones pass as plain ones do."""
    front, _ = await make_front(certs.server_tls(TlsMode.PERMISSIVE, ClientAuth.REQUIRE))
    assert await echo(front, certs.channel_credentials(certs.client), b"cert") == b"cert"
    assert await echo(front, None, b"plain") == b"plain"
    await refused(front, certs.channel_credentials())
    await refused(front, certs.channel_credentials(certs.stranger))


async def test_big_messages_cross_the_relay_both_ways(
    make_front: FrontFactory, certs: Certs
) -> None:
    """Many times the transports' buffers: the relay pauses and resumes reading
    as the other side drains, and loses nothing."""
    front, _ = await make_front(certs.server_tls(TlsMode.PERMISSIVE))
    body = os.urandom(6 * MiB)
    assert await echo(front, certs.channel_credentials(), body) == body
    assert await echo(front, None, body) == body


async def test_one_connection_over_the_bound_is_closed_at_once(
    make_front: FrontFactory, certs: Certs
) -> None:
    front, _ = await make_front(certs.server_tls(TlsMode.PERMISSIVE), max_connections=1)
    _, held_writer = await asyncio.open_connection("127.0.0.1", front.port)
    await eventually(lambda: front.connections == 1, "the first connection taken")
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    async with asyncio.timeout(HANG_GUARD_S):
        assert await reader.read() == b""  # closed without a byte
    assert front.refused == 1
    writer.close()
    held_writer.close()
    await eventually(lambda: front.connections == 0, "the held connection given up")
    assert await echo(front, None, b"room again") == b"room again"


async def test_a_silent_client_is_closed_after_the_handshake_timeout(
    make_front: FrontFactory, certs: Certs
) -> None:
    front, _ = await make_front(certs.server_tls(TlsMode.PERMISSIVE), handshake_timeout_s=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    async with asyncio.timeout(HANG_GUARD_S):
        assert await reader.read() == b""
    writer.close()
    await eventually(lambda: front.refused == 1 and front.connections == 0, "silence refused")


async def test_garbage_and_broken_handshakes_leave_the_port_serving(
    make_front: FrontFactory, certs: Certs
) -> None:
    front, _ = await make_front(certs.server_tls(TlsMode.PERMISSIVE))
    for opening in (b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", b"\x00" * 64):
        reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
        writer.write(opening)
        async with asyncio.timeout(HANG_GUARD_S):
            while await reader.read(65536):
                pass  # grpc's or the TLS layer's answer, then the close
        writer.close()
    await eventually(lambda: front.connections == 0, "every bad connection ended")
    assert await echo(front, certs.channel_credentials(), b"still") == b"still"


async def test_stop_ends_relayed_connections(make_front: FrontFactory, certs: Certs) -> None:
    front, backend = await make_front(certs.server_tls(TlsMode.PERMISSIVE))
    async with channel(front, None) as ch:
        assert await ch.unary_unary(ECHO)(b"open", timeout=HANG_GUARD_S) == b"open"
        assert front.connections == 1 and len(front.peers) == 1
        front.stop_accepting()
        await backend.server.stop(0)
        await front.stop(1.0)
        assert front.connections == 0 and len(front.peers) == 0
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", front.port)) != 0  # nothing listens


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_front_on_both_event_loops(
    loop: str, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tidemq serve` runs on uvloop, whose transports and TLS are its own:
    plain, TLS, a silent peer and garbage on each loop."""
    pytest.importorskip("uvloop")
    monkeypatch.setenv(event_loop.ENV_VAR, loop)

    async def scenario() -> None:
        assert event_loop.loop_name() == loop
        peers = RelayedPeers()
        backend = Backend(peers)
        await backend.server.start()
        tls = certs.server_tls(TlsMode.PERMISSIVE, ClientAuth.OPTIONAL)
        front = TlsFront("f", "127.0.0.1", 0, tls, backend.path, peers, handshake_timeout_s=0.3)
        await front.start()
        try:
            assert await echo(front, None, b"plain") == b"plain"
            assert await echo(front, certs.channel_credentials(certs.client), b"tls") == b"tls"
            await refused(front, certs.channel_credentials(certs.stranger))
            for opening in (b"", b"\x16\x03\x01\x00\x05hello"):
                reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
                writer.write(opening)
                async with asyncio.timeout(HANG_GUARD_S):
                    while await reader.read(65536):
                        pass
                writer.close()
            await eventually(lambda: front.connections == 0, "every connection ended")
            assert front.refused == 3 and len(peers) == 0
            assert all(peer.startswith("ipv4:127.0.0.1:") for peer in backend.seen)
        finally:
            front.stop_accepting()
            await backend.server.stop(0)
            await front.stop(1.0)
            remove_private_socket(backend.path)

    event_loop.run(scenario())
