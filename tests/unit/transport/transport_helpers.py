"""Helpers for transport tests: an echo handler, a raw byte peer."""

from __future__ import annotations

import asyncio
import contextlib

from tidemq.protocol import CommandDecoder, RemotingCommand, ResponseCode
from tidemq.transport import Connection, Handler

DEADLINE = 5.0


def echo(code: int = ResponseCode.SUCCESS) -> Handler:
    """A handler answering ``code`` with the request's body and extFields."""

    async def handle(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, code, ext_fields=request.ext_fields, body=request.body
        )

    return handle


class RawPeer:
    """A plain TCP client that writes any bytes and decodes what comes back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = CommandDecoder()
        self.received: list[RemotingCommand] = []

    @classmethod
    async def open(cls, port: int) -> RawPeer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_command(self, timeout: float = DEADLINE) -> RemotingCommand:
        async with asyncio.timeout(timeout):
            while not self.received:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("server closed the connection")
                self.received.extend(self.decoder.feed(data))
        return self.received.pop(0)

    async def wait_eof(self, timeout: float = DEADLINE) -> bytes:
        """Read until the server closes; return whatever arrived meanwhile."""
        chunks = []
        async with asyncio.timeout(timeout):
            while data := await self.reader.read(65536):
                chunks.append(data)
        return b"".join(chunks)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
