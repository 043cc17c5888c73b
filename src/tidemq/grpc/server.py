"""The gRPC endpoint's server: grpc.aio over one MessagingServicer.

Plaintext (h2c, what both official clients use by default) or, given a
certificate and key, TLS only (grpc-python cannot serve both on one port,
so RocketMQ's permissive mode is refused before it gets here:
tidemq.broker.tls_settings); with `tls_ca` and `require_client_auth`, a
client must show a certificate that chains to it. Inbound messages up to 130 MiB (a 4 MiB body
plus headers must fit; the Java proxy allows as much); responses are not
compressed (the Node client asks for identity). A connection without an
RPC for `max_idle_s` (the broker's connection_max_idle_s, 120 s) is closed.
`interceptors` run in front of every handler (access control: acl_interceptor).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.grpc.servicer import MessagingServicer

log = logging.getLogger(__name__)

MAX_INBOUND_BYTES = 130 * 1024 * 1024


class GrpcEndpoint:
    """`await start()` binds host:port (0: any free port), `port`, `await stop()`."""

    def __init__(
        self,
        servicer: MessagingServicer,
        host: str,
        port: int,
        *,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_ca: str | None = None,
        require_client_auth: bool = False,
        max_idle_s: float = 120.0,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("TLS needs both a certificate and a key")
        self.servicer = servicer
        self.host = host
        self._requested_port = port
        self.tls = tls_cert is not None
        self._tls_files = (tls_cert, tls_key)
        self._tls_ca = tls_ca
        self._require_client_auth = require_client_auth
        self.port = 0
        self._max_idle_ms = int(max_idle_s * 1000)
        self._server: grpc.aio.Server | None = None
        self._interceptors = tuple(interceptors)

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
        cert, key = self._tls_files
        if cert is not None and key is not None:
            ca = self._tls_ca
            credentials = grpc.ssl_server_credentials(
                [(Path(key).read_bytes(), Path(cert).read_bytes())],
                root_certificates=Path(ca).read_bytes() if ca is not None else None,
                require_client_auth=self._require_client_auth,
            )
            self.port = server.add_secure_port(address, credentials)
        else:
            self.port = server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen for gRPC on {address}")
        await server.start()
        self._server = server
        log.info("gRPC endpoint at %s:%d (%s)", self.host, self.port, "TLS" if self.tls else "h2c")

    async def stop(self, grace: float = 2.0) -> None:
        server, self._server = self._server, None
        if server is not None:
            self.servicer.close_sessions()
            await server.stop(grace)
