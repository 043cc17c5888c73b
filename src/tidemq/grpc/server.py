"""The gRPC endpoint's server: grpc.aio over one MessagingServicer.

TLS follows RocketMQ's modes (``tls``: tidemq.transport.tls.ServerTls, the
proxy's gRPC port reads the same tls.server.mode):

* ``disabled``: plaintext (h2c, what both official clients use by default);
* ``enforcing`` with client verification ``none`` or ``require``: grpc's own
  TLS on the port (with ``require``, a client certificate chaining to ``ca``);
* ``permissive`` (TLS and plain on one port), or client verification
  ``optional``: grpc-python can do neither, so the TLS front (tls_front.py)
  takes the port and relays to grpc listening in plaintext on a private
  Unix socket; ``peers`` then names each call's real client (the access
  control and the servicer read through it).

Inbound messages up to 130 MiB (a 4 MiB body plus headers must fit; the Java
proxy allows as much); responses are not compressed (the Node client asks
for identity). A connection without an RPC for `max_idle_s` (the broker's
connection_max_idle_s, 120 s) is closed. `interceptors` run in front of
every handler (access control: acl_interceptor).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.grpc.relayed_peers import RelayedPeers
from tidemq.grpc.servicer import MessagingServicer
from tidemq.grpc.tls_front import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    TlsFront,
    private_socket_path,
    remove_private_socket,
)
from tidemq.transport.tls import ClientAuth, ServerTls, TlsMode

__all__ = ["MAX_INBOUND_BYTES", "GrpcEndpoint", "needs_front"]

log = logging.getLogger(__name__)

MAX_INBOUND_BYTES = 130 * 1024 * 1024


def needs_front(tls: ServerTls) -> bool:
    """Whether grpc's own TLS cannot serve `tls` (permissive, or optional client certificates)."""
    if tls.mode is TlsMode.DISABLED:
        return False
    return tls.mode is TlsMode.PERMISSIVE or tls.verify_client is ClientAuth.OPTIONAL


class GrpcEndpoint:
    """`await start()` binds host:port (0: any free port), `port`, `await stop()`."""

    def __init__(
        self,
        servicer: MessagingServicer,
        host: str,
        port: int,
        *,
        tls: ServerTls | None = None,
        peers: RelayedPeers | None = None,
        max_idle_s: float = 120.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.servicer = servicer
        self.host = host
        self._requested_port = port
        self.tls_settings = tls if tls is not None else ServerTls()
        self.tls = self.tls_settings.enabled
        self.peers = peers if peers is not None else RelayedPeers()
        self.port = 0
        self._max_idle_ms = int(max_idle_s * 1000)
        self._max_connections = max_connections
        self._handshake_timeout_s = handshake_timeout_s
        self._server: grpc.aio.Server | None = None
        self._interceptors = tuple(interceptors)
        self.front: TlsFront | None = None
        self._socket_path: str | None = None

    async def start(self) -> None:
        options: list[tuple[str, int]] = [
            ("grpc.max_receive_message_length", MAX_INBOUND_BYTES),
            ("grpc.max_send_message_length", MAX_INBOUND_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        if self._max_idle_ms > 0:
            # A connection with no RPC (a Telemetry stream counts) for this long
            # gets a GOAWAY, as a remoting connection is closed when idle.
            options.append(("grpc.max_connection_idle_ms", self._max_idle_ms))
        server = grpc.aio.server(options=options, interceptors=self._interceptors)
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self.servicer, server)
        address = f"{self.host}:{self._requested_port}"
        tls = self.tls_settings
        if needs_front(tls):
            await self._start_behind_front(server, address)
        else:
            if tls.enabled:
                self.port = server.add_secure_port(address, _credentials(tls))
            else:
                self.port = server.add_insecure_port(address)
            if self.port == 0:
                raise OSError(f"cannot listen for gRPC on {address}")
            await server.start()
        self._server = server
        log.info("gRPC endpoint at %s:%d (%s)", self.host, self.port, self.describe())

    async def _start_behind_front(self, server: grpc.aio.Server, address: str) -> None:
        path = private_socket_path()
        self._socket_path = path
        try:
            if server.add_insecure_port(f"unix:{path}") == 0:
                raise OSError(f"cannot listen for gRPC on unix:{path}")
            await server.start()
            front = TlsFront(
                "grpc-front",
                self.host,
                self._requested_port,
                self.tls_settings,
                path,
                self.peers,
                max_connections=self._max_connections,
                handshake_timeout_s=self._handshake_timeout_s,
            )
            try:
                await front.start()
            except OSError as exc:
                raise OSError(f"cannot listen for gRPC on {address}: {exc}") from exc
        except BaseException:
            await server.stop(0)
            remove_private_socket(path)
            self._socket_path = None
            raise
        self.front = front
        self.port = front.port

    def describe(self) -> str:
        """How the port speaks: "h2c", "TLS", "TLS permissive", with client verification."""
        tls = self.tls_settings
        if not tls.enabled:
            return "h2c"
        text = "TLS" if tls.mode is TlsMode.ENFORCING else "TLS permissive (plain too)"
        if tls.verify_client is not ClientAuth.NONE:
            text += f", client certificates {tls.verify_client.value}"
        return text

    async def stop(self, grace: float = 2.0) -> None:
        server, self._server = self._server, None
        front, self.front = self.front, None
        if server is not None:
            self.servicer.close_sessions()
            if front is not None:
                front.stop_accepting()
            await server.stop(grace)
            await self.servicer.stop_renewing()
        if front is not None:
            await front.stop(min(grace, 2.0))
        if self._socket_path is not None:
            remove_private_socket(self._socket_path)
            self._socket_path = None


def _credentials(tls: ServerTls) -> grpc.ServerCredentials:
    assert tls.cert is not None and tls.key is not None
    return grpc.ssl_server_credentials(
        [(Path(tls.key).read_bytes(), Path(tls.cert).read_bytes())],
        root_certificates=Path(tls.ca).read_bytes() if tls.ca is not None else None,
        require_client_auth=tls.verify_client is ClientAuth.REQUIRE,
    )
