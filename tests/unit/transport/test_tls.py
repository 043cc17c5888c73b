"""TLS on a remoting port, in each of RocketMQ's modes, with real sockets and certificates.

Each cell of mode x client kind (plain, TLS, TLS showing a certificate from
an unknown CA) is a test here; the same against real `tidemq` processes is
in tests/integration/test_tls_*.py. Garbage and broken handshakes on the
port leave the server serving.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from transport_helpers import echo

from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.testing.certs import CertSet, Pair
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport import (
    ClientAuth,
    RemotingClient,
    RemotingClosedError,
    RemotingConnectError,
    RemotingError,
    RemotingServer,
    ServerTls,
    TlsConfig,
    TlsConfigError,
    TlsMode,
)

ECHO = 40


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return CertSet(tmp_path_factory.mktemp("certs"))


ServerFactory = Callable[..., Awaitable[RemotingServer]]
ClientFactory = Callable[..., RemotingClient]


def server_tls(certs: CertSet, mode: TlsMode, verify: ClientAuth = ClientAuth.NONE) -> ServerTls:
    return certs.server_tls(mode, verify)


def tls_client(
    make_client: ClientFactory, certs: CertSet, shown: Pair | None = None
) -> RemotingClient:
    return make_client(tls=certs.client_tls(shown))


async def round_trip(client: RemotingClient, port: int, body: bytes = b"hi") -> bytes:
    """Send `body` to the echo handler; return what came back."""
    request = RemotingCommand.request(ECHO, body=body)
    async with asyncio.timeout(HANG_GUARD_S):
        response = await client.invoke(f"127.0.0.1:{port}", request, timeout=HANG_GUARD_S)
    assert response.code == ResponseCode.SUCCESS
    return response.body


async def refused(client: RemotingClient, port: int) -> RemotingError:
    """The call fails (promptly: the hang guard is far above the invoke timeout)."""
    with pytest.raises(RemotingError) as caught:
        async with asyncio.timeout(HANG_GUARD_S):
            await client.invoke(
                f"127.0.0.1:{port}", RemotingCommand.request(ECHO), timeout=HANG_GUARD_S / 2
            )
    return caught.value


async def test_enforcing_serves_tls_and_closes_plain_with_a_clear_error(
    certs: CertSet,
    make_server: ServerFactory,
    make_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tidemq.transport")
    server = await make_server({ECHO: echo()}, tls=server_tls(certs, TlsMode.ENFORCING))
    assert await round_trip(tls_client(make_client, certs), server.port, b"secret") == b"secret"
    error = await refused(make_client(), server.port)
    assert isinstance(error, RemotingClosedError)
    assert "TLS enforcing" in str(error)
    assert server.tls_refused == 1
    (line,) = [r.getMessage() for r in caplog.records if "before they were set up" in r.message]
    assert "closed 1 connection(s)" in line and "plain connection" in line


async def test_permissive_serves_plain_and_tls_on_one_port(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({ECHO: echo()}, tls=server_tls(certs, TlsMode.PERMISSIVE))
    plain, tls = make_client(), tls_client(make_client, certs)
    assert await round_trip(plain, server.port, b"plain") == b"plain"
    assert await round_trip(tls, server.port, b"tls") == b"tls"
    tls_connection = tls.connections[f"127.0.0.1:{server.port}"]
    plain_connection = plain.connections[f"127.0.0.1:{server.port}"]
    assert tls_connection.remote[1] == server.port and plain_connection.remote[1] == server.port
    assert server.tls_refused == 0


async def test_disabled_refuses_a_tls_client(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({ECHO: echo()})
    assert server.tls.mode is TlsMode.DISABLED
    error = await refused(tls_client(make_client, certs), server.port)
    assert isinstance(error, RemotingConnectError)
    assert await round_trip(make_client(), server.port) == b"hi"


@pytest.mark.parametrize("mode", [TlsMode.PERMISSIVE, TlsMode.ENFORCING])
async def test_required_client_certificate_from_an_unknown_ca_is_refused(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory, mode: TlsMode
) -> None:
    server = await make_server({ECHO: echo()}, tls=server_tls(certs, mode, ClientAuth.REQUIRE))
    assert await round_trip(tls_client(make_client, certs, certs.client), server.port) == b"hi"
    await refused(tls_client(make_client, certs, certs.stranger), server.port)
    await refused(tls_client(make_client, certs), server.port)  # no certificate at all
    await eventually(lambda: server.tls_refused == 2, "the two refusals counted")


async def test_optional_client_certificate_must_be_good_if_shown(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server(
        {ECHO: echo()}, tls=server_tls(certs, TlsMode.ENFORCING, ClientAuth.OPTIONAL)
    )
    assert await round_trip(tls_client(make_client, certs), server.port) == b"hi"
    assert await round_trip(tls_client(make_client, certs, certs.client), server.port) == b"hi"
    await refused(tls_client(make_client, certs, certs.stranger), server.port)


async def test_client_refuses_a_server_its_ca_did_not_sign(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({ECHO: echo()}, tls=server_tls(certs, TlsMode.ENFORCING))
    client = make_client(tls=TlsConfig(ca=str(certs.other_ca.cert)))
    error = await refused(client, server.port)
    assert isinstance(error, RemotingConnectError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)


def _garbage() -> list[bytes]:
    rng = random.Random(17)
    openings = [
        b"",  # connect and close
        b"\x16",  # one byte of a handshake record
        b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03",  # a ClientHello cut short
        b"\x16\x03\x01\xff\xff" + bytes(64),  # a handshake record of zeros
        b"\x16" + rng.randbytes(300),  # a handshake byte, then noise
        b"GET / HTTP/1.1\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"\x00\x00\x00\x10\x00\x00\x00\x08",  # half a remoting frame
    ]
    return openings + [rng.randbytes(rng.randrange(1, 200)) for _ in range(24)]


@pytest.mark.parametrize("mode", [TlsMode.PERMISSIVE, TlsMode.ENFORCING])
async def test_garbage_and_half_handshakes_never_take_the_server_down(
    certs: CertSet, make_server: ServerFactory, make_client: ClientFactory, mode: TlsMode
) -> None:
    server = await make_server({ECHO: echo()}, tls=server_tls(certs, mode), frame_timeout_s=2.0)
    loop = asyncio.get_running_loop()
    sockets = []
    for opening in _garbage():
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setblocking(False)
        if opening:
            await loop.sock_sendall(sock, opening)
        sockets.append(sock)
    for sock in sockets[::2]:
        sock.close()  # half of them go away mid-handshake, the rest stay silent
    client = tls_client(make_client, certs)
    assert await round_trip(client, server.port) == b"hi"
    if mode is TlsMode.PERMISSIVE:
        assert await round_trip(make_client(), server.port) == b"hi"
    # the silent and half-open ones are closed by the frame or handshake deadline
    await eventually(
        lambda: server.setting_up == 0 and len(server.connections) <= 2,
        "only the good clients left",
    )
    for sock in sockets[1::2]:
        sock.close()
    assert await round_trip(client, server.port, b"again") == b"again"


def test_a_mode_without_its_certificate_is_refused() -> None:
    with pytest.raises(TlsConfigError, match="needs a certificate"):
        ServerTls(TlsMode.ENFORCING)
    with pytest.raises(TlsConfigError, match="needs the CA"):
        ServerTls("permissive", "c.pem", "k.pem", verify_client="require")  # type: ignore[arg-type]
    with pytest.raises(TlsConfigError, match="must be one of"):
        ServerTls("strict")  # type: ignore[arg-type]


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(TlsConfigError, match=r"missing\.pem"):
        ServerTls(TlsMode.ENFORCING, missing, missing).context()
    with pytest.raises(TlsConfigError, match=r"missing\.pem"):
        TlsConfig(ca=missing).context()
