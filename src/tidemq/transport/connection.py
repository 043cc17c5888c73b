"""One remoting connection, either end: frames in, commands dispatched, frames out.

A ``Connection`` is the asyncio protocol of one TCP stream. Bytes go through a
``CommandDecoder``; each decoded command is either

* a **response** (flag bit 0): it completes the pending ``request`` with the
  same opaque (an unknown opaque is logged and dropped), or
* a **request**: it runs ``handler(request, connection)`` in its own task, so
  many requests are in flight at once and are answered in any order. The
  answer gets the request's opaque, the response flag and the request's
  serialize type whatever the handler set; oneway requests (flag bit 1) and
  handlers returning None get no answer. More than ``max_in_flight``
  unfinished requests -> immediate SYSTEM_BUSY. A handler raising
  ValueError (HeaderError and ProtocolError are ValueErrors) -> SYSTEM_ERROR
  with the exception text as remark; any other exception -> SYSTEM_ERROR,
  logged with its traceback.

Writes never block and frames never interleave: each frame is encoded whole
and queued; the frames queued during one event-loop pass go to the transport
in one ``writelines`` call at the end of the pass (one syscall for many
answers; ``close`` flushes the queue first). The transport's buffer is
bounded: once it holds more than ``max_write_buffer`` bytes (the peer stopped
reading) the connection is aborted. A malformed or oversized frame aborts the
connection too; nothing else is affected.

On a server, a connection also counts against the server's ``FrameBudget``
(frame_budget.py): an incomplete frame that spans reads reserves its whole
size, and the connection stops reading while its frame does not fit. It
notes whether any traffic passed either way, and how old its incomplete
frame is, for the server's sweep (idle and slow-frame limits, server.py).

Handler tasks belong to the ``TaskSet`` of the owner (server or client), not
to the connection: when the peer goes away, running handlers finish (their
answers are dropped) and the owner cancels whatever is left when it stops.
Closing fails every pending ``request`` with RemotingClosedError at once.

Until its first frame decodes, a connection looks at the peer's first bytes
(protocol/sniff.py): a peer speaking HTTP/2 (a gRPC port), HTTP/1.x or TLS is
closed at once, and its pending requests fail with
RemotingForeignProtocolError naming the protocol, instead of waiting for a
frame that never comes or failing with a bare "connection lost".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TypeAlias, cast

from tidemq.common.rpc_stats import RpcStats
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import ResponseCode, request_code_name
from tidemq.protocol.command import (
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    CommandDecoder,
    RemotingCommand,
)
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.frame import MAX_FRAME_SIZE
from tidemq.protocol.sniff import SNIFF_BYTES, foreign_protocol

from .deadlines import Deadlines
from .errors import RemotingClosedError, RemotingForeignProtocolError, RemotingTimeoutError
from .frame_budget import FrameAllowance, FrameBudget

logger = logging.getLogger("tidemq.transport")

DEFAULT_MAX_IN_FLIGHT = 1024
DEFAULT_MAX_WRITE_BUFFER = 64 * 1024 * 1024
"""Bytes queued for a peer that does not read before its connection is aborted."""

OPAQUE_LIMIT = 2**31 - 10
"""Opaques run 1, 2, ... and wrap back to 1 before reaching this (as ali-ons and Java)."""

_SILENT_CLOSE_HINT = (
    " before answering anything (a port in TLS enforcing mode closes plain "
    "connections: connect with TLS)"
)
_CONNECTION_IDS = itertools.count(1)
_NO_ADDRESS = ("", 0)


class OpaqueAllocator:
    """Request ids: 1, 2, ... wrapping back to 1 below OPAQUE_LIMIT."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def allocate(self) -> int:
        value = self._next
        self._next = value + 1 if value + 1 < OPAQUE_LIMIT else 1
        return value


class Connection(asyncio.Protocol):
    """One TCP peer: send frames, issue requests to the peer, answer its requests."""

    def __init__(
        self,
        handler: Handler,
        tasks: TaskSet,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_write_buffer: int = DEFAULT_MAX_WRITE_BUFFER,
        opaques: OpaqueAllocator | None = None,
        on_open: Callable[[Connection], None] | None = None,
        on_close: Callable[[Connection], None] | None = None,
        name: str = "remoting",
        frame_budget: FrameBudget | None = None,
        sign: Callable[[RemotingCommand], None] | None = None,
        rpc_stats: RpcStats | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.id = next(_CONNECTION_IDS)
        self.remote: tuple[str, int] = _NO_ADDRESS
        self.local: tuple[str, int] = _NO_ADDRESS
        self.attributes: dict[str, object] = {}
        self._handler = handler
        self._tasks = tasks
        self._max_in_flight = max_in_flight
        self._max_write_buffer = max_write_buffer
        self._decoder = CommandDecoder(max_frame_size)
        self._opaques = opaques if opaques is not None else OpaqueAllocator()
        self._on_open = on_open
        self._on_close = on_close
        self._name = name
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._deadlines: Deadlines | None = None
        """The pending requests' deadlines (made with the first request)."""
        self._timeouts: dict[int, tuple[int, float]] = {}
        """Opaque -> (request code, timeout) of each pending request, for the error."""
        self._in_flight = 0
        self._closed = False
        self._writing_paused = False
        self._outbox: list[bytes] = []
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lost: asyncio.Future[None] | None = None
        self._frame_budget = frame_budget
        self._sign = sign
        """Called on each request this end sends, just before it is encoded
        (a client's ACL signature: tidemq.acl.credentials); None: nothing to add."""
        self._allowance: FrameAllowance | None = None
        self._traffic = False
        self._quiet_since = 0.0
        self._head: bytes | None = b""
        """The peer's first bytes, kept until a frame decodes (None after)."""
        self._foreign: RemotingForeignProtocolError | None = None
        """Why the connection was closed, when the peer spoke another protocol."""
        self._rpc_stats = rpc_stats
        """Where each answered request's latency goes (a server's, with metrics
        on): stamped when decoded, recorded when the answer is queued."""

    def __repr__(self) -> str:
        host, port = self.remote
        return f"<Connection #{self.id} {self._name} peer={host}:{port}>"

    # --- public API ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once close/abort was called or the peer went away."""
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests from the peer whose handler has not finished yet."""
        return self._in_flight

    @property
    def pending(self) -> int:
        """Requests to the peer still waiting for their response."""
        return len(self._pending)

    @property
    def buffered(self) -> int:
        """Bytes received and held for a frame not complete yet."""
        return self._decoder.buffered

    def quiet_for(self, now: float) -> float:
        """Seconds without traffic either way, as seen by the calls to this.

        Reads and writes only set a flag (no clock read per read); each call
        turns a set flag into "traffic at `now`". Called once per sweep, it
        is late by at most one sweep interval, never early.
        """
        if self._traffic:
            self._traffic = False
            self._quiet_since = now
        return max(0.0, now - self._quiet_since)

    def frame_age(self, now: float) -> float | None:
        """Seconds since the incomplete frame started (or got its budget); None: none."""
        allowance = self._allowance
        if allowance is None or allowance.waiting_since is not None:
            return None
        since = allowance.frame_since
        return None if since is None else now - since

    def budget_wait(self, now: float) -> float | None:
        """Seconds this connection has been paused for frame budget; None: it reads."""
        allowance = self._allowance
        if allowance is None or allowance.waiting_since is None:
            return None
        return now - allowance.waiting_since

    def send(self, command: RemotingCommand) -> None:
        """Queue one frame as is (a response or a oneway push); dropped if closed.

        Raises ProtocolError if the command cannot be encoded.
        """
        if self._closed:
            return
        self._write(command.encode())

    def answer_now(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer `request` now rather than with this loop pass's batched
        writes: for an answer its peer is waiting on (a held pull woken by an
        arrival), so it does not queue behind the writes other connections
        scheduled first. Frames already queued here go out before it. A
        handler that answers this way returns None. Dropped if closed."""
        if request.flag & ONEWAY_FLAG:
            return
        self._answer(request, response, long_polling=True)
        self._flush()

    def send_oneway(self, command: RemotingCommand) -> None:
        """Send a request that expects no answer: gives it an opaque and sets the oneway bit.

        Raises RemotingClosedError if the connection is closed.
        """
        if self._closed:
            raise RemotingClosedError(f"{self!r} is closed")
        outgoing = _outgoing(
            command, self._opaques.allocate(), (command.flag | ONEWAY_FLAG) & ~RESPONSE_FLAG
        )
        if self._sign is not None:
            self._sign(outgoing)
        self._write(outgoing.encode())

    async def request(
        self, command: RemotingCommand, timeout: float, *, owned: bool = False
    ) -> RemotingCommand:
        """Send ``command`` with a fresh opaque and wait for the peer's response.

        The caller's command is not modified, unless ``owned``: a caller that
        made the command for this one request gives it up, and it goes out
        with its opaque and flag set in place (no copy). Raises
        RemotingTimeoutError after ``timeout`` seconds (the connection stays
        open; a late answer is dropped) and RemotingClosedError if the
        connection closes first.
        """
        opaque, future = self._start_request(command, timeout, owned)
        try:
            return await future
        finally:
            if self._pending.get(opaque) is future:  # abandoned (cancelled) while waiting
                self._forget(opaque)
            if future.done() and not future.cancelled():
                future.exception()  # mark retrieved: nobody else will look at it

    def request_nowait(
        self, command: RemotingCommand, timeout: float, *, owned: bool = False
    ) -> asyncio.Future[RemotingCommand]:
        """`request` without the coroutine: the frame is queued now and the
        returned future gets the response or the error `request` would raise.
        For a caller that continues in a done callback (no task per request);
        the request is dropped when it is answered, times out or the
        connection closes, so the future needs no clean-up."""
        return self._start_request(command, timeout, owned)[1]

    def _start_request(
        self, command: RemotingCommand, timeout: float, owned: bool
    ) -> tuple[int, asyncio.Future[RemotingCommand]]:
        if self._closed:
            raise self._closed_error()
        opaque = self._next_free_opaque()
        flag = command.flag & ~(RESPONSE_FLAG | ONEWAY_FLAG)
        if owned:
            outgoing = command
            outgoing.opaque = opaque
            outgoing.flag = flag
        else:
            outgoing = _outgoing(command, opaque, flag)
        if self._sign is not None:
            self._sign(outgoing)
        head, body = outgoing.encode_parts()
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = Deadlines(loop, self._time_out)
        self._pending[opaque] = future
        self._timeouts[opaque] = (command.code, timeout)
        deadlines.add(opaque, loop.time() + timeout)
        self._write_frame(head, body)
        return opaque, future

    def _forget(self, opaque: int) -> None:
        """Drop a pending request's bookkeeping (answered, or abandoned by its caller)."""
        self._pending.pop(opaque, None)
        self._timeouts.pop(opaque, None)
        deadlines = self._deadlines
        if deadlines is not None:
            deadlines.discard(opaque)

    def _time_out(self, opaque: int) -> None:
        """The request's deadline passed: it fails with RemotingTimeoutError (the
        connection stays open; a late answer is dropped)."""
        future = self._pending.pop(opaque, None)
        code, timeout = self._timeouts.pop(opaque, (0, 0.0))
        if future is not None and not future.done():
            future.set_exception(
                RemotingTimeoutError(
                    f"{request_code_name(code)} to {self.remote[0]}:{self.remote[1]} "
                    f"got no response within {timeout:g}s (opaque {opaque})"
                )
            )

    def close(self) -> None:
        """Close after flushing what is queued; pending requests fail now."""
        if self._closed:
            return
        self._flush()
        self._mark_closed("connection closed")
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping queued output; pending requests fail now."""
        self._mark_closed("connection aborted")
        self._outbox = []
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the transport is gone; False if ``timeout`` passed first."""
        lost = self._lost
        if lost is None:
            return True
        if timeout is None:
            await asyncio.shield(lost)
            return True
        done, _ = await asyncio.wait({lost}, timeout=timeout)
        return bool(done)

    # --- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not _is_stream_transport(transport):
            raise TypeError(f"a stream transport is needed, got {type(transport).__name__}")
        stream = self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self._lost = self._loop.create_future()
        self._quiet_since = self._loop.time()
        if self._frame_budget is not None:
            self._allowance = FrameAllowance(
                self._frame_budget,
                pause=stream.pause_reading,
                resume=self._resume_reading,
                clock=self._loop.time,
            )
        self.remote = _address(transport.get_extra_info("peername"))
        self.local = _address(transport.get_extra_info("sockname"))
        _set_nodelay(transport.get_extra_info("socket"))
        logger.debug("%s: %r opened", self._name, self)
        if self._on_open is not None:
            self._on_open(self)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "connection lost" if exc is None else f"connection lost: {exc}"
        transport = self._transport
        if (
            self._head == b""  # the peer closed before sending a byte
            and self._pending
            and transport is not None
            and transport.get_extra_info("ssl_object") is None
        ):
            reason += _SILENT_CLOSE_HINT
        self._mark_closed(reason)
        self._outbox = []
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        logger.debug("%s: %r closed%s", self._name, self, f" ({exc})" if exc else "")
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                logger.exception("%s: on_close callback failed for %r", self._name, self)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self._traffic = True
        if self._head is not None and self._sniff(data):
            return
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            logger.warning("%s: bad frame from %r, closing it: %s", self._name, self, exc)
            self.abort()
            return
        if commands:
            self._head = None
        for command in commands:
            if command.flag & RESPONSE_FLAG:
                self._complete(command)
            else:
                self._dispatch(command)
        allowance = self._allowance
        if allowance is not None:
            pending = self._decoder.pending_frame_size
            if (pending or allowance.frame_since is not None) and not allowance.after_read(
                pending, bool(commands)
            ):
                logger.warning(
                    "%s: %r sends a frame of %d bytes, more than the whole frame buffer "
                    "budget (%d bytes); closing it",
                    self._name,
                    self,
                    pending,
                    self._frame_budget.limit if self._frame_budget else 0,
                )
                self.abort()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._check_write_buffer()

    def resume_writing(self) -> None:
        self._writing_paused = False

    # --- internals -------------------------------------------------------------

    def _sniff(self, data: bytes) -> bool:
        """True (and the connection aborted) when the first bytes are another protocol's."""
        seen = self._head or b""
        head = seen + data[: SNIFF_BYTES - len(seen)]
        protocol = foreign_protocol(head)
        if protocol is None:
            self._head = None if len(head) >= SNIFF_BYTES else head  # decided: remoting
            return False
        logger.info("%s: %r speaks %s, not remoting; closing it", self._name, self, protocol)
        self._foreign = RemotingForeignProtocolError(
            f"{self!r}: the peer speaks {protocol}, not RocketMQ remoting", protocol
        )
        self.abort()
        return True

    def _closed_error(self) -> RemotingClosedError:
        """A fresh error for a call on a closed connection, of the kind that closed it."""
        foreign = self._foreign
        if foreign is not None:
            return RemotingForeignProtocolError(str(foreign), foreign.protocol)
        return RemotingClosedError(f"{self!r} is closed")

    def _resume_reading(self) -> None:
        transport = self._transport
        if transport is not None and not self._closed:
            transport.resume_reading()

    def _write(self, data: bytes) -> None:
        # Frames written during one event-loop pass go out in one writelines call
        # (one syscall instead of one per frame); each frame stays whole.
        if self._closed or self._loop is None:
            return
        self._outbox.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _write_frame(self, head: bytes, body: bytes) -> None:
        """A frame as its head and body: a large body goes out as its own
        buffer of the gathering write (no copy into one frame first)."""
        if len(body) < GATHER_BODY_BYTES:
            self._write(head + body)
            return
        if self._closed or self._loop is None:
            return
        self._outbox.append(head)
        self._write(body)

    def _flush(self) -> None:
        self._flush_scheduled = False
        outbox, self._outbox = self._outbox, []
        transport = self._transport
        if not outbox or transport is None or transport.is_closing():
            return
        self._traffic = True
        if len(outbox) == 1:
            transport.write(outbox[0])
        else:
            transport.writelines(outbox)
        if self._writing_paused:
            self._check_write_buffer()

    def _check_write_buffer(self) -> None:
        transport = self._transport
        if transport is not None and transport.get_write_buffer_size() > self._max_write_buffer:
            logger.warning(
                "%s: %r does not read; %d bytes queued exceed %d, aborting",
                self._name,
                self,
                transport.get_write_buffer_size(),
                self._max_write_buffer,
            )
            self.abort()

    def _mark_closed(self, reason: str) -> bool:
        if self._closed:
            return False
        self._closed = True
        if self._allowance is not None:
            self._allowance.close()
        pending, self._pending = self._pending, {}
        self._timeouts = {}
        if self._deadlines is not None:
            self._deadlines.close()
        for future in pending.values():
            if not future.done():
                future.set_exception(
                    self._closed_error()
                    if self._foreign is not None
                    else RemotingClosedError(f"{self!r}: {reason}")
                )
        return True

    def _next_free_opaque(self) -> int:
        for _ in range(len(self._pending) + 1):
            opaque = self._opaques.allocate()
            if opaque not in self._pending:
                return opaque
        raise AssertionError("unreachable: more pending requests than opaques tried")

    def _complete(self, response: RemotingCommand) -> None:
        opaque = response.opaque
        future = self._pending.pop(opaque, None)
        if future is not None:
            self._timeouts.pop(opaque, None)
            if self._deadlines is not None:
                self._deadlines.discard(opaque)
        if future is None or future.done():
            logger.debug(
                "%s: %r dropped a response with unknown opaque %d (late or unsolicited)",
                self._name,
                self,
                response.opaque,
            )
            return
        future.set_result(response)

    def _dispatch(self, request: RemotingCommand) -> None:
        if self._rpc_stats is not None and self._loop is not None:
            request.received_at = self._loop.time()
        if self._in_flight >= self._max_in_flight:
            logger.warning(
                "%s: %r has %d requests in flight, refusing %s",
                self._name,
                self,
                self._in_flight,
                request_code_name(request.code),
            )
            if not request.flag & ONEWAY_FLAG:
                remark = (
                    f"[OVERLOAD]system busy, {self._in_flight} requests in flight on this "
                    f"connection (limit {self._max_in_flight}), start flow control for a while"
                )
                self._answer(
                    request,
                    RemotingCommand.response_to(request, ResponseCode.SYSTEM_BUSY, remark),
                )
            return
        self._in_flight += 1
        self._tasks.spawn(self._run(request))

    async def _run(self, request: RemotingCommand) -> None:
        # The count drops as the handler's work ends, not in a done callback
        # (one loop callback less per request). A task cancelled before it
        # ever ran (its owner stopping with no grace) keeps its count, on a
        # connection that is being closed.
        try:
            try:
                response = await self._handler(request, self)
            except ValueError as exc:
                logger.debug(
                    "%s: %s from %r refused: %s",
                    self._name,
                    request_code_name(request.code),
                    self,
                    exc,
                    exc_info=True,
                )
                response = RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
            except Exception as exc:
                logger.exception(
                    "%s: handler for %s from %r failed",
                    self._name,
                    request_code_name(request.code),
                    self,
                )
                response = RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
                )
            if response is not None:
                if not request.flag & ONEWAY_FLAG:
                    self._answer(request, response)
                elif self._rpc_stats is not None:
                    self._record(request, response.code, oneway=True)
        finally:
            self._in_flight -= 1

    def _answer(
        self, request: RemotingCommand, response: RemotingCommand, long_polling: bool = False
    ) -> None:
        if self._closed:
            return
        if self._rpc_stats is not None:
            self._record(request, response.code, long_polling)
        response.opaque = request.opaque
        response.flag |= RESPONSE_FLAG
        response.serialize_type = request.serialize_type
        try:
            head, body = response.encode_parts()
        except ProtocolError as exc:
            logger.error(
                "%s: response to %s cannot be encoded: %s",
                self._name,
                request_code_name(request.code),
                exc,
            )
            self._write(
                RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, f"response cannot be encoded: {exc}"
                ).encode()
            )
            return
        self._write_frame(head, body)

    def _record(
        self, request: RemotingCommand, code: int, long_polling: bool = False, oneway: bool = False
    ) -> None:
        """The request's latency, from its decoding to its answer being queued
        (RocketMQ measures to the write's completion: the same but the
        socket write)."""
        stats, loop, started = self._rpc_stats, self._loop, request.received_at
        if stats is not None and loop is not None and started:
            elapsed_ms = (loop.time() - started) * 1000.0
            stats.record(request.code, code, elapsed_ms, long_polling, oneway)


GATHER_BODY_BYTES = 16 << 10
"""Bodies from this size are written from their own buffer (below it, one
copy into the frame is cheaper than another buffer in the write)."""

Handler: TypeAlias = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]
"""Answers one request: returns the response, or None to send nothing."""


def _outgoing(command: RemotingCommand, opaque: int, flag: int) -> RemotingCommand:
    """A shallow copy of ``command`` with its own opaque and flag (the caller's stays as is)."""
    return RemotingCommand(
        command.code,
        command.language,
        command.version,
        opaque,
        flag,
        command.remark,
        command.ext_fields,
        command.body,
        command.serialize_type,
    )


_STREAM_METHODS = ("write", "writelines", "pause_reading", "resume_reading", "abort")


def _is_stream_transport(transport: object) -> bool:
    """An asyncio stream transport, or one that acts as one: uvloop's TCPTransport
    is not registered as an asyncio.Transport."""
    return isinstance(transport, asyncio.Transport) or all(
        callable(getattr(transport, name, None)) for name in _STREAM_METHODS
    )


def _set_nodelay(sock: object) -> None:
    """TCP_NODELAY on a TCP socket, as Java's remoting sets it. uvloop sets it on
    every TCP transport; asyncio only on sockets whose protocol number says TCP,
    and the sockets acceptor.py accepts say 0 (socket.create_server's default)."""
    setsockopt = getattr(sock, "setsockopt", None)
    if (
        setsockopt is not None
        and getattr(sock, "family", None) in (socket.AF_INET, socket.AF_INET6)
        and getattr(sock, "type", None) == socket.SOCK_STREAM
    ):
        with contextlib.suppress(OSError):
            setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _address(info: object) -> tuple[str, int]:
    if isinstance(info, tuple) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return _NO_ADDRESS


async def close_connections(connections: list[Connection], timeout: float) -> None:
    """Close each connection, flushing output; abort those not gone within ``timeout``."""
    for connection in connections:
        connection.close()
    if not connections:
        return
    results = await asyncio.gather(*(c.wait_closed(timeout) for c in connections))
    stragglers = [c for c, done in zip(connections, results, strict=True) if not done]
    for connection in stragglers:
        connection.abort()
    if stragglers:
        await asyncio.gather(*(c.wait_closed(1.0) for c in stragglers))
