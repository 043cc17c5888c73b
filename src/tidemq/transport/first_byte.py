"""Waiting for an accepted socket's first byte without taking it off the socket.

A port serving plain and TLS connections (TLS ``permissive``, tls.py) must
know which one a peer speaks before the connection is set up: the first
byte decides (0x16 opens a TLS handshake), as RocketMQ's TlsModeHandler
peeks at it (apache/rocketmq rocketmq-all-5.2.0, NettyRemotingServer.java).
The byte is read with MSG_PEEK, so the chosen protocol (plain remoting, or
``ssl`` doing the handshake) still reads the stream from its start.
"""

from __future__ import annotations

import asyncio
import socket

__all__ = ["peek_first_byte"]


async def peek_first_byte(sock: socket.socket, timeout: float) -> int | None:
    """The first byte the peer sent, left unread; None if it closed without sending.

    Raises TimeoutError if nothing came within ``timeout`` seconds and OSError
    if the connection failed (reset, ...).
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        while True:
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                await _readable(loop, sock.fileno())
                continue
            return data[0] if data else None


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def on_ready() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, on_ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
