"""Accepting connections without drowning the log when file descriptors run out.

Why not ``loop.create_server``: on Python 3.11 its accept loop
(asyncio/selector_events.py ``_accept_connection``) handles EMFILE / ENFILE /
ENOBUFS / ENOMEM by logging "socket.accept() out of system resource" with a
traceback, removing the reader and scheduling a retry in 1 s, but then does
not return: it calls accept() again, up to ``backlog`` (100) times, each
failure logging and scheduling another retry. A second later those 100
retries fire spread over the time the logging took; each re-arms the reader,
finds the listening socket still readable and fails 100 more times. The
storm feeds itself and keeps the loop busy logging (CPython gh-151615, fixed
in 2026; a reported broker wrote 690,000 such messages, 307 MB, in 135 s).

Here a failed accept stops the batch: the reader is removed and one retry
is scheduled. The pause is short (10 ms) when the batch accepted something
before failing: draining a backlog of connections whose peers already left
takes descriptors faster than the loop closes them, and the next try a
moment later finds them free. Without progress it doubles up to
``retry_s`` (1 s, asyncio's pause). The log gets at most one line per
``report_interval_s`` saying how many accepts failed since the last line
(the server's sweep calls ``report`` so the last count is not lost), and
one line when accepting works again.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

from tidemq.common.backoff import doubling_delay

from .housekeeping import LogThrottle

logger = logging.getLogger("tidemq.transport")

ACCEPT_RETRY_S = 1.0
"""The longest pause: asyncio's own (constants.ACCEPT_RETRY_DELAY)."""
ACCEPT_RETRY_FIRST_S = 0.01
REPORT_INTERVAL_S = 10.0
ACCEPT_BATCH = 100
"""Connections taken per readiness event before other sockets get a turn (as asyncio)."""


class Acceptor:
    """Accepts on one listening socket and hands each new socket to `on_accept`."""

    def __init__(
        self,
        sock: socket.socket,
        on_accept: Callable[[socket.socket], None],
        *,
        name: str,
        retry_s: float = ACCEPT_RETRY_S,
        report_interval_s: float = REPORT_INTERVAL_S,
    ) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        host, port = sock.getsockname()[:2]
        self.address: tuple[str, int] = (str(host), int(port))
        self._on_accept = on_accept
        self._name = name
        self._retry_s = retry_s
        self._throttle = LogThrottle(report_interval_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._delay: float | None = None
        self._closed = False
        self._failing = False
        self._unreported = 0
        self._recovery_unreported = False
        self._last_error = ""
        self.failures = 0
        """Accepts that failed, in total."""

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._accept_ready)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
        self._sock.close()

    def report(self) -> None:
        """Write the summary still owed, if a line is allowed now (the sweep calls this)."""
        if (self._unreported or self._recovery_unreported) and self._due():
            self._write_report()

    # --- internals -------------------------------------------------------------

    def _accept_ready(self) -> None:
        progressed = False
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                self._delay = None  # drained: the next failure starts short again
                return
            except ConnectionAbortedError:
                continue  # the peer gave up while queued: take the next one
            except OSError as exc:
                self._back_off(exc, progressed)
                return
            progressed = True
            if self._failing:
                self._failing = False
                self._recovery_unreported = True
                self.report()
            conn.setblocking(False)
            self._on_accept(conn)

    def _back_off(self, exc: OSError, progressed: bool) -> None:
        assert self._loop is not None
        self._loop.remove_reader(self._fd)
        previous = None if progressed else self._delay
        self._delay = doubling_delay(previous, first=ACCEPT_RETRY_FIRST_S, maximum=self._retry_s)
        self._retry = self._loop.call_later(self._delay, self._resume)
        self.failures += 1
        self._unreported += 1
        self._failing = True
        self._recovery_unreported = False
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        self._last_error = f"{name}: {exc.strerror or exc}"
        if self._due():
            self._write_report()

    def _resume(self) -> None:
        self._retry = None
        if not self._closed and self._loop is not None:
            self._loop.add_reader(self._fd, self._accept_ready)

    def _due(self) -> bool:
        return self._throttle.due(asyncio.get_running_loop().time())

    def _write_report(self) -> None:
        host, port = self.address
        if self._failing:
            logger.warning(
                "%s: cannot accept connections on %s:%d (%s): %d accept(s) failed since "
                "the last report, retrying at most %gs apart",
                self._name,
                host,
                port,
                self._last_error,
                self._unreported,
                self._retry_s,
            )
        else:
            logger.warning(
                "%s: accepting connections on %s:%d again (%d accept(s) failed since "
                "the last report, %s)",
                self._name,
                host,
                port,
                self._unreported,
                self._last_error,
            )
            self._recovery_unreported = False
        self._unreported = 0


async def listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Non-blocking listening sockets for every address `host` resolves to (as create_server).

    An empty host listens on every interface; IPv6 sockets are IPv6-only so an
    IPv4 one can share the port. OSError (address in use, ...) closes the ones
    already bound.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in infos))
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            sock = socket.create_server(address, family=family, backlog=backlog)
            sockets.append(sock)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
