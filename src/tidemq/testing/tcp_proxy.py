"""A TCP proxy that can cut a link the way networks fail, for partition tests.

Put it between two processes (a master's HA port and its slave: the slave's
`ha_master_address` names the proxy) and switch it at any time:

- `pass_through()`: bytes flow both ways;
- `drop()`: every connection is aborted (both sides see it reset) and new
  ones are accepted and closed at once, as a peer that is down;
- `blackhole()`: connections stay open but nothing is forwarded either way,
  and new ones are accepted but not connected onwards, as a partition where
  packets vanish: a peer notices only by its own timeouts. Bytes are not
  read while blackholed (the kernel's buffers fill), so on healing the
  streams continue intact, as TCP's retransmissions would make them;
- `delay(seconds)`: every chunk is forwarded that much later, in order;
- `cut()`: abort the open connections once (new ones go through).

Every connection's pumps are tasks of the proxy's TaskSet; `stop` ends them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass

from tidemq.common.tasks import TaskSet

__all__ = ["LinkMode", "TcpProxy"]

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
PENDING_CHUNKS = 64
"""Chunks read but not yet forwarded (delay mode) per direction: then reading waits."""


class LinkMode(enum.Enum):
    PASS = "pass"
    DROP = "drop"
    BLACKHOLE = "blackhole"
    DELAY = "delay"


@dataclass(eq=False)
class _Link:
    """One accepted connection and, once connected, its upstream."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class TcpProxy:
    def __init__(
        self,
        upstream: str,
        upstream_port: int | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """Forward to `upstream`, "host:port" (or a host, and `upstream_port`)."""
        if upstream_port is None:
            upstream, _, text = upstream.rpartition(":")
            upstream_port = int(text)
        self._upstream = (upstream, upstream_port)
        self._bind = (host, port)
        self._server: asyncio.Server | None = None
        self._tasks = TaskSet("tcp-proxy")
        self._links: set[_Link] = set()
        self._open = asyncio.Event()
        self._open.set()
        self.mode = LinkMode.PASS
        self.delay_s = 0.0
        self.accepted = 0
        """Connections accepted since start, whatever became of them."""
        self.forwarded_bytes = 0
        """Bytes forwarded, both directions."""

    @property
    def address(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def connections(self) -> int:
        """Connections open through the proxy now (connected onwards or waiting to be)."""
        return len(self._links)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, *self._bind)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.abort()
        await self._tasks.cancel_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> TcpProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- switching ----------------------------------------------------------------------

    def pass_through(self) -> None:
        self._set(LinkMode.PASS, 0.0)

    def heal(self) -> None:
        """The partition ends: the same as `pass_through`."""
        self.pass_through()

    def cut(self) -> None:
        """Abort every open connection once; new ones go through as the mode says."""
        for link in list(self._links):
            link.abort()

    def drop(self) -> None:
        self._set(LinkMode.DROP, 0.0)
        for link in list(self._links):
            link.abort()

    def blackhole(self) -> None:
        self._set(LinkMode.BLACKHOLE, 0.0)

    def delay(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"delay {seconds}: must be >= 0")
        self._set(LinkMode.DELAY, seconds)

    def _set(self, mode: LinkMode, delay_s: float) -> None:
        log.info("proxy %s -> %s:%d: %s", self._bind, *self._upstream, mode.value)
        self.mode = mode
        self.delay_s = delay_s
        if mode is LinkMode.BLACKHOLE:
            self._open.clear()
        else:
            self._open.set()

    # -- connections --------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.mode is LinkMode.DROP:
            writer.transport.abort()
            return
        link = _Link(writer)
        self._links.add(link)
        self._tasks.spawn(self._serve(link, reader))

    async def _serve(self, link: _Link, client_reader: asyncio.StreamReader) -> None:
        try:
            await self._open.wait()  # blackholed: accepted, never connected onwards
            if self.mode is LinkMode.DROP:
                return
            up_reader, link.upstream = await asyncio.open_connection(*self._upstream)
            await asyncio.gather(
                self._pump(client_reader, link.upstream),
                self._pump(up_reader, link.client),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.abort()
            self._links.discard(link)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction until either side closes; any end ends the link."""
        loop = asyncio.get_running_loop()
        pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(PENDING_CHUNKS)

        async def read() -> None:
            while True:
                await self._open.wait()
                data = await reader.read(CHUNK)
                await pending.put((loop.time() + self.delay_s, data))
                if not data:
                    return

        async def write() -> None:
            while True:
                due, data = await pending.get()
                if not data:
                    writer.transport.abort()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)  # the delay this mode injects
                await self._open.wait()
                if self.mode is LinkMode.DROP:
                    return
                writer.write(data)
                self.forwarded_bytes += len(data)
                await writer.drain()

        reading = self._tasks.spawn(read())
        writing = self._tasks.spawn(write())
        try:
            await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, writing):
                task.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)
            writer.transport.abort()
