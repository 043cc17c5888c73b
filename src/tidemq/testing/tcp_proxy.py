"""A TCP proxy for partition tests: forwards, or blackholes, the bytes between two ends.

Put it between a slave and its master's HA port (the master advertises the
proxy's address, ``ha_advertised_address``) and call `blackhole()`: the
connections stay open but nothing crosses in either direction, as when a
network partition drops packets; `heal()` lets bytes through again (what
was dropped stays dropped, so the ends see a broken stream and reconnect, as
after a real partition); `cut()` closes every connection.
"""

from __future__ import annotations

import asyncio
import contextlib

from tidemq.common.tasks import TaskSet

__all__ = ["TcpProxy"]

_CHUNK = 64 * 1024


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.blackholed = False
        self.dropped_bytes = 0
        self.forwarded_bytes = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks = TaskSet("tcp-proxy")

    @property
    def port(self) -> int:
        assert self._server is not None, "the proxy is not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        await self._tasks.cancel_all()

    def blackhole(self) -> None:
        self.blackholed = True

    def heal(self) -> None:
        self.blackholed = False

    def cut(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        self._tasks.spawn(self._pump(reader, up_writer))
        self._tasks.spawn(self._pump(up_reader, writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(_CHUNK):
                if self.blackholed:
                    self.dropped_bytes += len(data)
                    continue
                writer.write(data)
                self.forwarded_bytes += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.transport.abort()
            self._writers.discard(writer)
