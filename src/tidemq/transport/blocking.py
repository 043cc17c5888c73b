"""Blocking remoting requests made on the caller's own thread.

Why: a blocking client that runs its asyncio core on a loop thread pays two
thread hand-offs per request (caller -> loop thread to write, loop thread ->
caller to return), each a wake-up of a sleeping thread and a GIL switch. A
request made here writes and reads a plain socket on the thread that asked,
as redis-py does, so a blocking `send` costs one round trip and no hand-off.

``BlockingChannel`` is one TCP socket (TCP_NODELAY) carrying one request at a
time; ``BlockingChannels`` keeps up to ``per_address`` of them per
``"host:port"`` for any number of threads: a request borrows an idle channel
(or opens one) and gives it back after its answer. An idle channel whose
peer closed it (a restarted broker) is dropped when next borrowed, so that a
stale socket never fails a send (and has a healthy broker isolated by the
producer's fault tolerance). When every channel of an
address is busy, ``acquire`` returns None and the caller takes another path
(the loop thread's shared connection), so threads never queue here and a
broker never sees more than ``per_address`` such sockets from one client.

A channel signs every request with `sign` (ACL credentials) and speaks TLS
with `tls`, as the loop thread's connections of the same client do.

Failures are the asyncio client's: RemotingConnectError (cannot connect
within the time left), RemotingTimeoutError (no answer in time),
RemotingClosedError (the peer closed, or the channels were closed) and
ProtocolError (a malformed frame). A channel that failed is closed, never
reused: after a timeout a late answer could still be on its way. Frames that
are not the answer (a request from the peer, a late answer to an earlier
request) are skipped.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable

from tidemq.protocol.codes import request_code_name
from tidemq.protocol.command import (
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    CommandDecoder,
    RemotingCommand,
)
from tidemq.protocol.frame import MAX_FRAME_SIZE

from .client import parse_address
from .connection import OpaqueAllocator
from .errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError
from .tls import TlsConfig

__all__ = ["BlockingChannel", "BlockingChannels"]

_READ_SIZE = 256 * 1024


class BlockingChannel:
    """One socket to one peer, used by one thread at a time."""

    def __init__(
        self,
        address: str,
        timeout: float,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        sign: Callable[[RemotingCommand], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Connect to `address` within `timeout` seconds (RemotingConnectError),
        with a TLS handshake in that time too when `ssl_context` is given."""
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            raise RemotingConnectError(str(exc)) from None
        if timeout <= 0:
            raise RemotingConnectError(f"no time left to connect to {address}")
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise RemotingConnectError(
                f"connect to {address} timed out after {timeout:g}s"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(f"connect to {address} failed: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            except (OSError, ValueError) as exc:
                sock.close()
                raise RemotingConnectError(f"TLS with {address} failed: {exc}") from exc
        self.address = address
        self._sock = sock
        self._sign = sign
        self._opaques = OpaqueAllocator()
        """Its own: opaques need only be unique per connection."""
        self._decoder = CommandDecoder(max_frame_size)
        self._ready: list[RemotingCommand] = []
        """Commands decoded from the last read and not looked at yet."""
        self.closed = False

    def request(self, command: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send `command` (given up by the caller: its opaque and flag are set
        in place) and return the peer's answer within `timeout` seconds."""
        if self.closed:
            raise RemotingClosedError(f"the channel to {self.address} is closed")
        deadline = time.monotonic() + timeout
        opaque = self._opaques.allocate()
        command.opaque = opaque
        command.flag &= ~(RESPONSE_FLAG | ONEWAY_FLAG)
        if self._sign is not None:
            self._sign(command)
        head, body = command.encode_parts()
        try:
            self._sock.settimeout(timeout)
            if len(body) < 16 << 10:
                self._sock.sendall(head + body)
            else:  # a large body is not copied into the frame
                self._sock.sendall(head)
                self._sock.sendall(body)
            while True:
                for answer in self._take():
                    if answer.opaque == opaque and answer.flag & RESPONSE_FLAG:
                        return answer
                self._read(deadline, timeout, command.code)
        except BaseException:
            self.close()
            raise

    def _take(self) -> list[RemotingCommand]:
        ready, self._ready = self._ready, []
        return ready

    def _read(self, deadline: float, timeout: float, code: int) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._late(code, timeout)
        self._sock.settimeout(remaining)
        try:
            data = self._sock.recv(_READ_SIZE)
        except TimeoutError:
            raise self._late(code, timeout) from None
        except OSError as exc:
            raise RemotingClosedError(f"the channel to {self.address} failed: {exc}") from exc
        if not data:
            raise RemotingClosedError(f"{self.address} closed the channel")
        self._ready = self._decoder.feed(data)

    def _late(self, code: int, timeout: float) -> RemotingTimeoutError:
        return RemotingTimeoutError(
            f"{request_code_name(code)} to {self.address} got no response within {timeout:g}s"
        )

    def still_open(self) -> bool:
        """False when the peer has closed (or reset) this idle channel, or it
        holds bytes nobody asked for: seen without blocking, so a channel
        whose broker restarted is not reused for a send that would fail."""
        if self.closed:
            return False
        try:
            self._sock.settimeout(0.0)  # a timeout would make recv wait for it
            if isinstance(self._sock, ssl.SSLSocket):
                # TLS allows no peek; a read consumes records that carry no
                # data (TLS 1.3 session tickets) and any data read means the
                # channel is dropped anyway
                self._sock.recv(1)
            else:
                self._sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return True  # nothing to read: the usual case
        except OSError:
            return False
        return False  # the end of the stream, or bytes nobody asked for

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self._sock.close()


class BlockingChannels:
    """Idle channels per address, at most `per_address` open per address."""

    def __init__(
        self,
        per_address: int,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        sign: Callable[[RemotingCommand], None] | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        if per_address < 1:
            raise ValueError("per_address must be at least 1")
        self.per_address = per_address
        self._max_frame_size = max_frame_size
        self._sign = sign
        self._ssl_context = tls.context() if tls is not None else None
        self._lock = threading.Lock()
        self._idle: dict[str, list[BlockingChannel]] = {}
        self._open: dict[str, int] = {}
        self._closed = False

    def acquire(self, address: str, timeout: float) -> BlockingChannel | None:
        """An idle channel to `address`, else a new one (connected within
        `timeout`), else None when `per_address` are busy or all are closed."""
        while True:
            with self._lock:
                if self._closed:
                    return None
                idle = self._idle.get(address)
                channel = idle.pop() if idle else None
                if channel is None:
                    opened = self._open.get(address, 0)
                    if opened >= self.per_address:
                        return None
                    self._open[address] = opened + 1
                    break
            if channel.still_open():
                return channel
            channel.close()  # its peer went away while it was idle: open another
            self._forget(address)
        try:
            return BlockingChannel(
                address,
                timeout,
                max_frame_size=self._max_frame_size,
                sign=self._sign,
                ssl_context=self._ssl_context,
            )
        except BaseException:
            self._forget(address)
            raise

    def release(self, channel: BlockingChannel) -> None:
        """Give `channel` back after a request (a failed or late one is closed)."""
        with self._lock:
            if not channel.closed and not self._closed:
                self._idle.setdefault(channel.address, []).append(channel)
                return
        channel.close()
        self._forget(channel.address)

    def open_count(self, address: str) -> int:
        """Channels to `address` open now, idle or busy."""
        with self._lock:
            return self._open.get(address, 0)

    def close(self) -> None:
        """Close the idle channels; busy ones close when released. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for channels in idle.values():
            for channel in channels:
                channel.close()
                self._forget(channel.address)

    def _forget(self, address: str) -> None:
        with self._lock:
            left = self._open.get(address, 0) - 1
            if left > 0:
                self._open[address] = left
            else:
                self._open.pop(address, None)
