"""The gRPC port's TLS where grpc-python falls short: permissive mode, optional client certs.

grpc-python serves a port either plaintext or TLS (``add_insecure_port`` /
``add_secure_port``), and its server credentials either require a client
certificate or ask for none (``ssl_server_credentials(require_client_auth=)``
maps to grpc core's REQUEST_AND_REQUIRE_..._AND_VERIFY or DONT_REQUEST;
the optional REQUEST_..._AND_VERIFY is not exposed: grpc/grpc
src/python/grpcio/grpc/_cython/_cygrpc/credentials.pyx.pxi). For RocketMQ's
``permissive`` mode (TLS and plain on one port, as the proxy's gRPC port
does: apache/rocketmq proxy/.../grpc/ProxyAndTlsProtocolNegotiator.java
TlsModeHandler) and for ``optional`` client verification, this front
listens on the public port instead:

* each accepted socket's first byte decides (transport/first_byte.py, as
  the remoting port): 0x16 is a TLS handshake, terminated here with the
  port's ``ssl`` context (ALPN ``h2``, client verification none, optional
  or require); anything else is plain HTTP/2 in ``permissive`` and closed
  in ``enforcing``; silence or a failed handshake is closed after
  ``handshake_timeout_s``;
* the connection is then relayed (relay.py, with back-pressure) to the
  grpc server, which listens in plaintext on a Unix socket in a private
  directory (mode 0700: only this user can reach it, so the front cannot be
  bypassed from another account);
* the front binds its end of each such socket to a name of its own and
  records, in ``RelayedPeers``, the client's real address under the peer
  string grpc shows for it; access control sees the client, not the front.

At most ``max_connections`` connections are relayed or being set up at once;
one more is closed at once. Refusals are counted (``refused``) and logged at
most once per ``report_interval_s``. Everything the front starts is owned
(a TaskSet for setups, the relays by their transports) and ``stop`` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import shutil
import socket
import ssl
import tempfile
from pathlib import Path

from tidemq.common.tasks import TaskSet
from tidemq.grpc.relay import DEFAULT_CLOSE_TIMEOUT_S, Relay
from tidemq.grpc.relayed_peers import RelayedPeers, grpc_peer
from tidemq.transport.acceptor import Acceptor, listening_sockets
from tidemq.transport.first_byte import peek_first_byte
from tidemq.transport.housekeeping import LogThrottle
from tidemq.transport.tls import TLS_HANDSHAKE_BYTE, ServerTls, TlsConfigError, TlsMode

__all__ = ["DEFAULT_MAX_CONNECTIONS", "TlsFront", "front_context"]

log = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_HANDSHAKE_TIMEOUT_S = 30.0
"""The first byte and the TLS handshake must come within this (the broker's frame_timeout_s)."""
REPORT_INTERVAL_S = 10.0
_BACKLOG = 1024
_MAX_UNIX_PATH = 100
"""sun_path holds 108 bytes on Linux, 104 on macOS; keep room for the names."""


def front_context(tls: ServerTls) -> ssl.SSLContext:
    """The port's server context, offering HTTP/2 by ALPN (gRPC clients require it)."""
    context = tls.context()
    if context is None:
        raise TlsConfigError("the TLS front needs a TLS mode other than disabled")
    context.set_alpn_protocols(["h2"])
    return context


class TlsFront:
    """`await start()` listens on host:port (0: any free port) for the clients of
    the grpc server at `upstream_path` (``private_socket_path()`` makes one in a
    fresh private directory); `port`; `await stop()`."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        tls: ServerTls,
        upstream_path: str,
        peers: RelayedPeers,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        close_timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S,
        report_interval_s: float = REPORT_INTERVAL_S,
    ) -> None:
        """TlsConfigError (a ValueError) when `tls` cannot be loaded."""
        if tls.mode is TlsMode.DISABLED:
            raise TlsConfigError("the TLS front serves permissive or enforcing, not disabled")
        if max_connections < 1 or handshake_timeout_s <= 0:
            raise ValueError("max_connections and handshake_timeout_s must be positive")
        self.name = name
        self.tls = tls
        self._ssl = front_context(tls)
        self._host = host
        self._requested_port = port
        self._upstream_path = upstream_path
        self.peers = peers
        self.max_connections = max_connections
        self._handshake_timeout_s = handshake_timeout_s
        self._close_timeout_s = close_timeout_s
        self._throttle = LogThrottle(report_interval_s)
        self._acceptors: list[Acceptor] = []
        self._setups = TaskSet(f"{name}-setup")
        self._relays: set[Relay] = set()
        self._all_closed: asyncio.Event | None = None
        self._names = itertools.count(1)
        self._stopping = False
        self.port = 0
        self.refused = 0
        """Connections closed before they were relayed (over the bound, plain
        in enforcing, failed or silent handshakes, grpc unreachable)."""
        self._unreported = 0

    @property
    def connections(self) -> int:
        """Connections relayed or being set up now."""
        return len(self._relays)

    async def start(self) -> None:
        sockets = await listening_sockets(self._host, self._requested_port, _BACKLOG)
        self._acceptors = [Acceptor(s, self._accepted, name=self.name) for s in sockets]
        for acceptor in self._acceptors:
            acceptor.start()
        self.port = self._acceptors[0].address[1]
        self._all_closed = asyncio.Event()
        self._all_closed.set()

    def stop_accepting(self) -> None:
        """Close the listening sockets; connections already relayed go on."""
        self._stopping = True
        for acceptor in self._acceptors:
            acceptor.close()

    async def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, drop setups still running, give relayed connections
        `timeout` seconds to end (the grpc server closes its side first), then abort them."""
        self.stop_accepting()
        await self._setups.cancel_all()
        if self._all_closed is not None and self._relays:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._all_closed.wait()
        for relay in list(self._relays):
            relay.abort()

    # -- accepting ----------------------------------------------------------------------

    def _accepted(self, sock: socket.socket) -> None:
        if self._stopping:
            sock.close()
            return
        if self.connections >= self.max_connections:
            sock.close()
            self._refusal(f"{self.max_connections} connections already (max_connections)")
            return
        loop = asyncio.get_running_loop()
        relay = Relay(loop.call_later, self._relay_closed, self._close_timeout_s)
        self._relays.add(relay)
        if self._all_closed is not None:
            self._all_closed.clear()
        task = self._setups.spawn(self._adopt(sock, relay))

        def cancelled_early(task: asyncio.Task[None]) -> None:
            if task.cancelled() and not relay.finished:  # before its first step
                relay.abort()
                sock.close()

        task.add_done_callback(cancelled_early)

    async def _adopt(self, sock: socket.socket, relay: Relay) -> None:
        loop = asyncio.get_running_loop()
        upstream: socket.socket | None = None
        try:
            host, port = sock.getpeername()[:2]
            # asyncio sets TCP_NODELAY only on sockets whose protocol number says
            # TCP; accepted ones say 0 (uvloop sets it on all): small HTTP/2 frames
            # must not wait for Nagle
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            first = await peek_first_byte(sock, self._handshake_timeout_s)
            if first == TLS_HANDSHAKE_BYTE:
                await loop.connect_accepted_socket(
                    lambda: relay.client,
                    sock,
                    ssl=self._ssl,
                    ssl_handshake_timeout=self._handshake_timeout_s,
                )
            elif first is not None and self.tls.mode is TlsMode.PERMISSIVE:
                await loop.connect_accepted_socket(lambda: relay.client, sock)
            else:
                raise ConnectionRefusedError(
                    "closed before sending anything"
                    if first is None
                    else "a plain connection to a port in TLS enforcing mode"
                )
            upstream, relay.key = await self._dial_upstream(loop)
            self.peers.add(relay.key, grpc_peer(str(host), int(port)))
            await loop.create_unix_connection(lambda: relay.upstream, sock=upstream)
            if relay.closing:
                raise ConnectionResetError("the client left while grpc was being reached")
            relay.start()
        except BaseException as exc:
            relay.abort()
            sock.close()
            if upstream is not None:
                upstream.close()
            if relay.key is not None:
                self.peers.remove(relay.key)
            if isinstance(exc, Exception):
                self._refusal(str(exc) or type(exc).__name__)
            else:
                raise

    async def _dial_upstream(self, loop: asyncio.AbstractEventLoop) -> tuple[socket.socket, str]:
        """A socket connected to grpc, bound to a name of its own first (so grpc's
        peer string for the connection tells it apart), and that name as grpc shows it."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            name = os.path.join(os.path.dirname(self._upstream_path), f"c{next(self._names)}")
            sock.bind(name)
            try:
                await loop.sock_connect(sock, self._upstream_path)
            finally:
                # the socket keeps its name after the file is gone; nothing piles up
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
        except BaseException:
            sock.close()
            raise
        return sock, f"unix:{name}"

    def _relay_closed(self, relay: Relay) -> None:
        self._relays.discard(relay)
        if relay.key is not None:
            self.peers.remove(relay.key)
        if not self._relays and self._all_closed is not None:
            self._all_closed.set()

    def _refusal(self, reason: str) -> None:
        """Count it; log at most one line per report interval, with the count since the last."""
        self.refused += 1
        self._unreported += 1
        if self._throttle.due(asyncio.get_running_loop().time()):
            log.info(
                "%s: closed %d connection(s) before relaying them (TLS %s), the last one: %s",
                self.name,
                self._unreported,
                self.tls.mode.value,
                reason,
            )
            self._unreported = 0


def private_socket_path() -> str:
    """A Unix socket path in a new directory only this user may enter."""
    directory = tempfile.mkdtemp(prefix="tidemq-grpc-")  # mode 0700
    path = os.path.join(directory, "grpc.sock")
    if len(path.encode()) > _MAX_UNIX_PATH:
        shutil.rmtree(directory, ignore_errors=True)
        raise OSError(
            f"the temporary directory {Path(directory).parent} is too deep for a Unix "
            "socket path: set TMPDIR to a shorter one"
        )
    return path


def remove_private_socket(path: str) -> None:
    """Remove what ``private_socket_path`` made (the socket and its directory)."""
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
