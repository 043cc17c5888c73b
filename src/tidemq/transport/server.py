"""The remoting TCP server: a request-code -> handler table behind a listening socket.

Dispatch (RocketMQ's processor table): a request whose code has no handler is
answered REQUEST_CODE_NOT_SUPPORTED with Java's remark
``" request type <code> not supported"``. Everything per connection
(concurrency, SYSTEM_BUSY bound, error mapping, bad frames) is described in
connection.py.

Shutdown order (``stop``): stop listening; answer new requests SYSTEM_BUSY
while the handlers already running get up to ``grace`` seconds to finish;
cancel the rest; close every connection (flushing, aborting any that do not
go within a second); only then return. ``on_close`` runs once per connection,
whichever side ended it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.frame import MAX_FRAME_SIZE

from .connection import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_WRITE_BUFFER,
    Connection,
    Handler,
    close_connections,
)

__all__ = ["Handler", "RemotingServer", "not_supported"]

logger = logging.getLogger("tidemq.transport")

_CLOSE_TIMEOUT = 1.0


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """Java's answer to a request code nobody handles."""
    return RemotingCommand.response_to(
        request,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        f" request type {request.code} not supported",
    )


class RemotingServer:
    """Serves ``handlers`` (request code -> async handler) on ``host:port``."""

    def __init__(
        self,
        name: str,
        handlers: Mapping[int, Handler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        on_close: Callable[[Connection], None] | None = None,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_write_buffer: int = DEFAULT_MAX_WRITE_BUFFER,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.name = name
        self._handlers: dict[int, Handler] = dict(handlers)
        self._host = host
        self._requested_port = port
        self._max_in_flight = max_in_flight
        self._on_close = on_close
        self._max_frame_size = max_frame_size
        self._max_write_buffer = max_write_buffer
        self._tasks = TaskSet(name)
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._stopping = False
        self._stopped = False

    def __repr__(self) -> str:
        return f"<RemotingServer {self.name} {self._host}:{self._port or self._requested_port}>"

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        if self._port is None:
            raise RuntimeError(f"{self!r} is not started")
        return self._port

    @property
    def host(self) -> str:
        return self._host

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections currently open."""
        return frozenset(self._connections)

    @property
    def in_flight(self) -> int:
        """Handler tasks still running, over all connections."""
        return len(self._tasks)

    async def start(self) -> None:
        if self._server is not None or self._stopping:
            raise RuntimeError(f"{self!r} was already started")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, self._host, self._requested_port
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        logger.info("%s: listening on %s:%d", self.name, self._host, self._port)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let running handlers finish up to ``grace``, close every connection."""
        if self._stopping:
            return
        self._stopping = True
        server = self._server
        if server is not None:
            server.close()
        if not await self._tasks.wait(grace):
            logger.warning(
                "%s: %d handler(s) still running after %gs grace, cancelling",
                self.name,
                len(self._tasks),
                grace,
            )
        await self._tasks.cancel_all()
        await close_connections(list(self._connections), _CLOSE_TIMEOUT)
        if server is not None:
            await server.wait_closed()
        self._stopped = True
        logger.info("%s: stopped", self.name)

    # --- internals -------------------------------------------------------------

    def _new_connection(self) -> Connection:
        return Connection(
            self._dispatch,
            self._tasks,
            max_in_flight=self._max_in_flight,
            max_frame_size=self._max_frame_size,
            max_write_buffer=self._max_write_buffer,
            on_open=self._connection_opened,
            on_close=self._connection_closed,
            name=self.name,
        )

    def _connection_opened(self, connection: Connection) -> None:
        self._connections.add(connection)
        if self._stopping:
            connection.close()

    def _connection_closed(self, connection: Connection) -> None:
        self._connections.discard(connection)
        if self._on_close is not None:
            self._on_close(connection)

    async def _dispatch(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        if self._stopping:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_BUSY,
                f"[REJECTREQUEST]system busy, {self.name} is shutting down",
            )
        handler = self._handlers.get(request.code)
        if handler is None:
            logger.debug("%s: request code %d not supported", self.name, request.code)
            return not_supported(request)
        return await handler(request, connection)
