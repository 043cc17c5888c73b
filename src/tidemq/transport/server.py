"""The remoting TCP server: a request-code -> handler table behind a listening socket.

Dispatch (RocketMQ's processor table): an optional ``gate`` sees every
request first and may answer it instead of its handler (access control,
as RocketMQ's server RPC hooks); a request whose code has no handler is
answered REQUEST_CODE_NOT_SUPPORTED with Java's remark
``" request type <code> not supported"``. Everything per connection
(concurrency, SYSTEM_BUSY bound, error mapping, bad frames) is described in
connection.py.

Bounds beyond one connection: connections are accepted by acceptor.py (a
pause and one log line per ``report_interval_s`` when file descriptors run
out); the bytes held for frames still arriving share one ``FrameBudget``
(frame_budget.py); one owned sweep task, every ``sweep_interval_s``, closes
connections quiet for ``max_idle_s`` (Java's 120 s), with a frame older than
``frame_timeout_s``, or paused for budget longer than that (housekeeping.py).
Time is the event loop's clock; tests shorten the limits.

TLS (``tls=``, tls.py): ``disabled`` serves as above, with no per-connection
cost; ``enforcing`` and ``permissive`` wait (up to ``frame_timeout_s``) for
the first byte of each accepted socket (first_byte.py): 0x16 sets the
connection up with ``ssl`` (asyncio's TLS, handshake within
``frame_timeout_s``), anything else is plain remoting in ``permissive`` and
closed in ``enforcing``, as RocketMQ's TlsModeHandler (apache/rocketmq
rocketmq-all-5.2.0, NettyRemotingServer.java). A peer that never sends, sends
garbage or a broken handshake costs one socket until then, nothing else;
such refusals are counted (``tls_refused``) and logged at most once per
``report_interval_s``.

Shutdown order (``stop``): stop listening; answer new requests SYSTEM_BUSY
while the handlers already running get up to ``grace`` seconds to finish;
cancel the rest; close every connection (flushing, aborting any that do not
go within a second); only then return. ``on_close`` runs once per connection,
whichever side ended it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias

from tidemq.common.rpc_stats import RpcStats
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.frame import MAX_FRAME_SIZE

from .acceptor import ACCEPT_RETRY_S, REPORT_INTERVAL_S, Acceptor, listening_sockets
from .connection import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_WRITE_BUFFER,
    Connection,
    Handler,
    close_connections,
)
from .first_byte import peek_first_byte
from .frame_budget import DEFAULT_FRAME_BUDGET, DEFAULT_FRAME_TIMEOUT_S, FrameBudget
from .housekeeping import LogThrottle, Verdict, verdict
from .tls import TLS_HANDSHAKE_BYTE, ServerTls, TlsMode

__all__ = ["DEFAULT_MAX_IDLE_S", "Gate", "Handler", "RemotingServer", "not_supported"]

logger = logging.getLogger("tidemq.transport")

_CLOSE_TIMEOUT = 1.0
DEFAULT_MAX_IDLE_S = 120.0
"""Java's NettyServerConfig.serverChannelMaxIdleTimeSeconds."""
DEFAULT_SWEEP_INTERVAL_S = 1.0
DEFAULT_BACKLOG = 1024
"""Java's NettySystemConfig.socketBacklog (asyncio's default is 100)."""
_SHOWN_PEERS = 3


Gate: TypeAlias = Callable[[RemotingCommand, Connection], RemotingCommand | None]
"""Looks at every request before its handler: None lets it through, a
response refuses it (access control, tidemq.acl.gate)."""


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
        max_idle_s: float | None = DEFAULT_MAX_IDLE_S,
        frame_budget_bytes: int = DEFAULT_FRAME_BUDGET,
        frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
        sweep_interval_s: float = DEFAULT_SWEEP_INTERVAL_S,
        backlog: int = DEFAULT_BACKLOG,
        accept_retry_s: float = ACCEPT_RETRY_S,
        report_interval_s: float = REPORT_INTERVAL_S,
        gate: Gate | None = None,
        tls: ServerTls | None = None,
        rpc_stats: RpcStats | None = None,
    ) -> None:
        """TlsConfigError (a ValueError) when `tls` cannot be loaded; `rpc_stats`:
        where every answered request's latency is counted (None: not measured)."""
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        if frame_timeout_s <= 0 or sweep_interval_s <= 0:
            raise ValueError("frame_timeout_s and sweep_interval_s must be positive")
        self.name = name
        self._handlers: dict[int, Handler] = dict(handlers)
        self._gate = gate
        self.tls = tls if tls is not None else ServerTls()
        self._ssl: ssl.SSLContext | None = self.tls.context()
        self.tls_refused = 0
        """Connections closed before they were set up: a plain peer in
        ``enforcing``, a failed or timed-out handshake, silence."""
        self._tls_unreported = 0
        self._tls_throttle = LogThrottle(report_interval_s)
        self._host = host
        self._requested_port = port
        self._max_in_flight = max_in_flight
        self._on_close = on_close
        self._max_frame_size = max_frame_size
        self._max_write_buffer = max_write_buffer
        self.max_idle_s = max_idle_s
        """Close connections quiet this long; None or 0: never."""
        self.frame_timeout_s = frame_timeout_s
        self.frame_budget = FrameBudget(frame_budget_bytes)
        self._sweep_interval_s = sweep_interval_s
        self._backlog = backlog
        self._accept_retry_s = accept_retry_s
        self._report_interval_s = report_interval_s
        self.rpc_stats = rpc_stats
        self._tasks = TaskSet(name)
        self._accepts = TaskSet(f"{name}-accept")
        self._acceptors: list[Acceptor] = []
        self._sweeper: asyncio.Task[None] | None = None
        self._connections: set[Connection] = set()
        self._port: int | None = None
        self._started = False
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

    @property
    def setting_up(self) -> int:
        """Accepted sockets not yet connections (waiting for a first byte or a handshake)."""
        return len(self._accepts)

    @property
    def accept_failures(self) -> int:
        """Accepts that failed (out of file descriptors, ...) since start."""
        return sum(acceptor.failures for acceptor in self._acceptors)

    async def start(self) -> None:
        if self._started or self._stopping:
            raise RuntimeError(f"{self!r} was already started")
        self._started = True
        sockets = await listening_sockets(self._host, self._requested_port, self._backlog)
        self._acceptors = [
            Acceptor(
                sock,
                self._accepted,
                name=self.name,
                retry_s=self._accept_retry_s,
                report_interval_s=self._report_interval_s,
            )
            for sock in sockets
        ]
        for acceptor in self._acceptors:
            acceptor.start()
        self._port = self._acceptors[0].address[1]
        self._sweeper = asyncio.get_running_loop().create_task(
            self._sweep_forever(), name=f"{self.name}-sweep"
        )
        logger.info("%s: listening on %s:%d", self.name, self._host, self._port)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let running handlers finish up to ``grace``, close every connection."""
        if self._stopping:
            return
        self._stopping = True
        for acceptor in self._acceptors:
            acceptor.close()
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        await self._accepts.cancel_all()
        if not await self._tasks.wait(grace):
            logger.warning(
                "%s: %d handler(s) still running after %gs grace, cancelling",
                self.name,
                len(self._tasks),
                grace,
            )
        await self._tasks.cancel_all()
        await close_connections(list(self._connections), _CLOSE_TIMEOUT)
        self._stopped = True
        logger.info("%s: stopped", self.name)

    def sweep(self, now: float) -> dict[Verdict, list[Connection]]:
        """Close the connections the limits condemn at `now` (loop time); return them."""
        closed: dict[Verdict, list[Connection]] = {}
        for connection in list(self._connections):
            found = verdict(
                quiet_s=connection.quiet_for(now),
                busy=connection.in_flight > 0,
                frame_age_s=connection.frame_age(now),
                waited_s=connection.budget_wait(now),
                max_idle_s=self.max_idle_s,
                frame_timeout_s=self.frame_timeout_s,
            )
            if found is None:
                continue
            closed.setdefault(found, []).append(connection)
            if found is Verdict.IDLE:
                connection.close()
            else:
                connection.abort()  # a half frame is not worth flushing answers for
        for found, connections in closed.items():
            self._log_closed(found, connections)
        for acceptor in self._acceptors:
            acceptor.report()
        return closed

    # --- internals -------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._sweep_interval_s)
            try:
                self.sweep(loop.time())
            except Exception:  # one bad sweep must not end the sweeping
                logger.exception("%s: connection sweep failed", self.name)

    def _log_closed(self, found: Verdict, connections: list[Connection]) -> None:
        peers = ", ".join(f"{c.remote[0]}:{c.remote[1]}" for c in connections[:_SHOWN_PEERS])
        more = len(connections) - _SHOWN_PEERS
        shown = peers + (f" and {more} more" if more > 0 else "")
        if found is Verdict.IDLE:
            logger.info(
                "%s: closed %d connection(s) idle for %gs (%s): %s",
                self.name,
                len(connections),
                self.max_idle_s,
                found.value,
                shown,
            )
            return
        budget = self.frame_budget
        logger.warning(
            "%s: closed %d connection(s): %s within %gs (frame buffer budget: %d of %d "
            "bytes reserved, %d connection(s) waiting): %s",
            self.name,
            len(connections),
            found.value,
            self.frame_timeout_s,
            budget.reserved,
            budget.limit,
            budget.waiting,
            shown,
        )

    def _accepted(self, sock: socket.socket) -> None:
        if self._stopping:
            sock.close()
            return
        self._accepts.spawn(self._adopt(sock))

    async def _adopt(self, sock: socket.socket) -> None:
        try:
            if self._ssl is None:
                await asyncio.get_running_loop().connect_accepted_socket(self._new_connection, sock)
            else:
                await self._adopt_tls(sock, self._ssl)
        except BaseException as exc:
            sock.close()
            if not isinstance(exc, Exception):
                raise
            if self._ssl is not None:
                self._tls_refusal(exc)
            else:
                logger.debug("%s: could not set up an accepted connection: %s", self.name, exc)

    def _tls_refusal(self, exc: Exception) -> None:
        """Count it; log at most one line per report interval, with the count since the last."""
        self.tls_refused += 1
        self._tls_unreported += 1
        if self._tls_throttle.due(asyncio.get_running_loop().time()):
            logger.info(
                "%s: closed %d connection(s) before they were set up (TLS %s), the last one: %s",
                self.name,
                self._tls_unreported,
                self.tls.mode.value,
                str(exc) or type(exc).__name__,
            )
            self._tls_unreported = 0

    async def _adopt_tls(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        """Plain or TLS by the first byte (permissive), or TLS only (enforcing)."""
        first = await peek_first_byte(sock, self.frame_timeout_s)
        loop = asyncio.get_running_loop()
        if first == TLS_HANDSHAKE_BYTE:
            await loop.connect_accepted_socket(
                self._new_connection,
                sock,
                ssl=context,
                ssl_handshake_timeout=self.frame_timeout_s,
            )
        elif first is not None and self.tls.mode is TlsMode.PERMISSIVE:
            await loop.connect_accepted_socket(self._new_connection, sock)
        else:
            raise ConnectionRefusedError(
                "closed before sending anything"
                if first is None
                else "a plain connection to a port in TLS enforcing mode"
            )

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
            frame_budget=self.frame_budget,
            rpc_stats=self.rpc_stats,
        )

    def _connection_opened(self, connection: Connection) -> None:
        self._connections.add(connection)
        if self._stopping:
            connection.close()

    def _connection_closed(self, connection: Connection) -> None:
        self._connections.discard(connection)
        if self._on_close is not None:
            self._on_close(connection)

    def use_handlers(self, handlers: Mapping[int, Handler]) -> None:
        """Serve with `handlers` from now on (requests already running finish
        with the old ones). A broker listens before its store is open, behind
        handlers that wait for it; once it is open this drops that layer."""
        self._handlers = dict(handlers)

    def _dispatch(
        self, request: RemotingCommand, connection: Connection
    ) -> Awaitable[RemotingCommand | None]:
        """The handler's awaitable for `request`, started here: a plain function,
        not a coroutine of its own (one layer less for every request)."""
        if self._stopping:
            return _answered(
                RemotingCommand.response_to(
                    request,
                    ResponseCode.SYSTEM_BUSY,
                    f"[REJECTREQUEST]system busy, {self.name} is shutting down",
                )
            )
        gate = self._gate
        if gate is not None:
            refusal = gate(request, connection)
            if refusal is not None:
                return _answered(refusal)
        handler = self._handlers.get(request.code)
        if handler is None:
            logger.debug("%s: request code %d not supported", self.name, request.code)
            return _answered(not_supported(request))
        return handler(request, connection)


async def _answered(response: RemotingCommand) -> RemotingCommand:
    """An answer known at once, as the awaitable a connection runs."""
    return response
