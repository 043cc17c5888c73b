"""Two connections joined byte for byte: what one end receives, the other sends.

The TLS front (tls_front.py) joins each client connection (plain, or TLS
it terminated) to one connection of its own to the grpc server. Both ends
are asyncio protocols, so the flow control is the transports' own:

* back-pressure: when an end's write buffer passes its high-water mark
  (``pause_writing``), the other end stops reading until it drains below
  the low-water mark (``resume_writing``); a slow reader on either side
  holds at most one buffer of the other's bytes, never an unbounded queue.
* closing: when either end sees end-of-stream or loses its connection, the
  other is closed gracefully (what it still holds is flushed), and aborted
  if it is not gone within ``close_timeout_s`` (a peer that stopped reading
  cannot keep it open). ``on_closed`` runs once, when both ends are gone.
  Bytes read once closing has begun are dropped: the end they were for is
  going or gone.

Bytes an end receives before the relay is started (the client's first
bytes, while the front is still connecting to grpc) are held and written
on start; both ends stop reading as soon as they connect, so that is at
most what one read returned. Timers come from ``later`` (the loop's
``call_later``), so the logic runs without a loop in tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

__all__ = ["DEFAULT_CLOSE_TIMEOUT_S", "Relay", "RelayEnd"]

DEFAULT_CLOSE_TIMEOUT_S = 5.0
"""How long a closing end may take to flush before it is aborted."""


class Timer(Protocol):
    def cancel(self) -> None: ...


class Transport(Protocol):
    """What a relay uses of a transport (uvloop's are not asyncio.Transport subclasses)."""

    def write(self, data: bytes) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


Later = Callable[[float, Callable[[], None]], Timer]
"""Runs a callback after a delay, as ``loop.call_later``; the result can cancel it."""


class RelayEnd(asyncio.Protocol):
    """One end of a relay; the relay's `client` or `upstream`."""

    def __init__(self, relay: Relay, name: str) -> None:
        self.relay = relay
        self.name = name
        self.transport: Transport | None = None
        self.other: RelayEnd | None = None
        self.held: list[bytes] = []
        self.connected = False
        self.lost = False
        self.reading = False
        self.writing_paused = False
        self.bytes_in = 0
        """Bytes received on this end (and written to the other)."""

    # -- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(Transport, transport)
        self.connected = True
        self.transport.pause_reading()  # until the relay starts
        if self.relay.closing:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        relay, other = self.relay, self.other
        if relay.closing:
            return  # the other end is closing or gone: nobody to pass it to
        if relay.started and other is not None and other.transport is not None:
            other.transport.write(data)
        else:
            self.held.append(data)

    def eof_received(self) -> bool | None:
        self.relay.close()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.relay.end_lost(self)

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self.other is not None:
            self.other.pause()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.other is not None and self.relay.started and not self.relay.closing:
            self.other.resume()

    # -- the relay's controls ------------------------------------------------------

    def pause(self) -> None:
        if self.reading and self.transport is not None and not self.lost:
            self.reading = False
            self.transport.pause_reading()

    def resume(self) -> None:
        if not self.reading and self.transport is not None and not self.lost:
            self.reading = True
            self.transport.resume_reading()

    def flush_held(self) -> None:
        """Write what arrived before the start to the other end."""
        held, self.held = self.held, []
        other = self.other
        if held and other is not None and other.transport is not None:
            other.transport.write(b"".join(held))

    @property
    def gone(self) -> bool:
        """Nothing left to wait for: lost, or never connected."""
        return self.lost or not self.connected


class Relay:
    """A client connection and its upstream joined: `client`, `upstream`, `start()`, `close()`."""

    def __init__(
        self,
        later: Later,
        on_closed: Callable[[Relay], None],
        close_timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S,
    ) -> None:
        self._later = later
        self._on_closed = on_closed
        self._close_timeout_s = close_timeout_s
        self.client = RelayEnd(self, "client")
        self.upstream = RelayEnd(self, "upstream")
        self.client.other, self.upstream.other = self.upstream, self.client
        self.key: str | None = None
        """What its owner knows it by (the front: grpc's peer string for it)."""
        self.started = False
        self.closing = False
        self.finished = False
        self._deadline: Timer | None = None

    def start(self) -> None:
        """Both ends are connected: pass on what each holds, then read both."""
        if self.closing or self.started:
            return
        self.started = True
        for end in (self.client, self.upstream):
            end.flush_held()
        for end in (self.client, self.upstream):
            assert end.other is not None
            if not end.other.writing_paused:
                end.resume()

    def close(self) -> None:
        """Close both ends gracefully (flushing), aborting any still open after the timeout."""
        if self.closing:
            return
        self.closing = True
        for end in (self.client, self.upstream):
            end.pause()
            if end.transport is not None and not end.lost:
                end.transport.close()
        if not self._check_finished():
            self._deadline = self._later(self._close_timeout_s, self.abort)

    def abort(self) -> None:
        """Drop both ends now, whatever they still hold."""
        self.closing = True
        for end in (self.client, self.upstream):
            if end.transport is not None and not end.lost:
                end.transport.abort()
        self._check_finished()

    def end_lost(self, end: RelayEnd) -> None:
        """An end's connection is gone: the other goes too."""
        if not self.closing:
            self.close()
        else:
            self._check_finished()

    def _check_finished(self) -> bool:
        if self.finished or not (self.client.gone and self.upstream.gone):
            return self.finished
        self.finished = True
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._on_closed(self)
        return True
