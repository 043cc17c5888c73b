"""The remoting client: one pooled connection per ``"host:port"``, requests matched by opaque.

A connection is opened lazily by the first call for its address (concurrent
first calls share one connect) and replaced by a fresh one on the next call
after it died. Opaques come from one counter per client (1, 2, ... wrapping
below 2**31 - 10), as in ali-ons and Java.

``invoke`` waits for the answer: a timeout raises RemotingTimeoutError and
leaves the connection open (unlike ali-ons, which closes it); a connection
that dies fails its waiting calls with RemotingClosedError; a connection that
cannot be opened within ``connect_timeout`` raises RemotingConnectError. The
time spent connecting counts against the invoke timeout.

Requests the server sends to the client (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE, ...) go to ``request_handler``, with the same task
and error handling as on the server; without a handler they are answered
REQUEST_CODE_NOT_SUPPORTED (oneway ones are never answered).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

from tidemq.common.tasks import TaskSet
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.frame import MAX_FRAME_SIZE

from .connection import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_WRITE_BUFFER,
    Connection,
    Handler,
    OpaqueAllocator,
    close_connections,
)
from .errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError
from .server import not_supported
from .tls import TlsConfig

__all__ = ["RemotingClient", "parse_address"]

logger = logging.getLogger("tidemq.transport")

_CLOSE_TIMEOUT = 1.0


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port); ValueError if malformed."""
    host, sep, port_text = address.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"broker address must be 'host:port', got {address!r}")
    return host, int(port_text)


class RemotingClient:
    """Sends requests to any number of servers over pooled connections."""

    def __init__(
        self,
        *,
        request_handler: Handler | None = None,
        connect_timeout: float = 3.0,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_write_buffer: int = DEFAULT_MAX_WRITE_BUFFER,
        name: str = "client",
        sign: Callable[[RemotingCommand], None] | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        """`sign` is applied to every request sent, just before it is encoded
        (ACL credentials, tidemq.acl.credentials.Credentials.sign). With
        `tls`, every connection is TLS (the handshake counts against
        `connect_timeout`; a failed one raises RemotingConnectError naming
        the reason); TlsConfigError (a ValueError) if its files do not load."""
        self._sign = sign
        self.tls = tls
        self._ssl: ssl.SSLContext | None = tls.context() if tls is not None else None
        self._request_handler = request_handler
        self._connect_timeout = connect_timeout
        self._max_in_flight = max_in_flight
        self._max_frame_size = max_frame_size
        self._max_write_buffer = max_write_buffer
        self._name = name
        self._opaques = OpaqueAllocator()
        self._tasks = TaskSet(name)
        self._connections: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connections(self) -> dict[str, Connection]:
        """Open pooled connections by address (a copy)."""
        return {a: c for a, c in self._connections.items() if not c.closed}

    async def connect(self, address: str) -> Connection:
        """The pooled connection to ``address``, opened now if there is none alive."""
        connection = self._connections.get(address)
        if connection is not None and not connection.closed:
            return connection
        lock = self._locks.get(address)
        if lock is None:
            lock = self._locks[address] = asyncio.Lock()
        async with lock:
            connection = self._connections.get(address)
            if connection is not None and not connection.closed:
                return connection
            if self._closed:
                raise RemotingClosedError(f"{self._name} is closed")
            connection = await self._open(address)
            self._connections[address] = connection
            return connection

    def live_connection(self, address: str) -> Connection | None:
        """The open pooled connection to ``address``, or None (then ``connect``):
        lets a hot path skip a coroutine layer when there is nothing to open."""
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            return None
        return connection

    async def invoke(
        self, address: str, command: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        """Send ``command`` to ``address`` and return the response (any code)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        connection = await self.connect(address)
        remaining = timeout - (loop.time() - started)
        if remaining <= 0:
            raise RemotingTimeoutError(f"connecting to {address} used up the {timeout:g}s timeout")
        return await connection.request(command, remaining)

    async def invoke_oneway(self, address: str, command: RemotingCommand) -> None:
        """Send ``command`` with the oneway flag bit; nothing is awaited but the connect."""
        connection = await self.connect(address)
        connection.send_oneway(command)

    async def close(self) -> None:
        """Close every connection (pending calls fail with RemotingClosedError)."""
        if self._closed:
            return
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await self._tasks.cancel_all()
        await close_connections(connections, _CLOSE_TIMEOUT)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- internals -------------------------------------------------------------

    async def _open(self, address: str) -> Connection:
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise RemotingConnectError(str(exc)) from None
        loop = asyncio.get_running_loop()

        def forget(connection: Connection) -> None:
            if self._connections.get(address) is connection:
                del self._connections[address]

        def factory() -> Connection:
            return Connection(
                self._handle_server_request,
                self._tasks,
                max_in_flight=self._max_in_flight,
                max_frame_size=self._max_frame_size,
                max_write_buffer=self._max_write_buffer,
                opaques=self._opaques,
                on_close=forget,
                name=self._name,
                sign=self._sign,
            )

        try:
            async with asyncio.timeout(self._connect_timeout):
                if self._ssl is None:
                    _, connection = await loop.create_connection(factory, host, port)
                else:
                    _, connection = await loop.create_connection(
                        factory, host, port, ssl=self._ssl, server_hostname=host
                    )
        except TimeoutError:
            raise RemotingConnectError(
                f"connect to {address} timed out after {self._connect_timeout:g}s"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(f"connect to {address} failed: {exc}") from exc
        if self._closed:
            connection.abort()
            raise RemotingClosedError(f"{self._name} closed while connecting to {address}")
        logger.debug("%s: connected to %s as %r", self._name, address, connection)
        return connection

    async def _handle_server_request(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        if self._request_handler is None:
            return not_supported(request)
        return await self._request_handler(request, connection)
