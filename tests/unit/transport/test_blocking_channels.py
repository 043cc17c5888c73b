"""Blocking requests on the caller's thread (transport/blocking.py), against a
real RemotingServer on 127.0.0.1; the blocking calls run in a worker thread so
that the test's loop keeps serving."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
from transport_helpers import echo

from tidemq.protocol import RemotingCommand
from tidemq.testing.waiting import eventually
from tidemq.transport import (
    Connection,
    RemotingClosedError,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
)
from tidemq.transport.blocking import BlockingChannel, BlockingChannels

ECHO, SILENT, HANG_UP, CHATTY = 1, 2, 3, 4
DEADLINE = 5.0


async def server_with_handlers(make_server: Callable[..., RemotingServer]) -> str:
    never = asyncio.Event()

    async def silent(request: RemotingCommand, connection: Connection) -> RemotingCommand:
        await never.wait()
        raise AssertionError("unreachable")

    async def hang_up(request: RemotingCommand, connection: Connection) -> None:
        connection.abort()

    async def chatty(request: RemotingCommand, connection: Connection) -> RemotingCommand:
        # a request of the server's own, then a stray answer, before the real answer
        connection.send_oneway(RemotingCommand.request(ECHO, {"from": "server"}))
        stray = RemotingCommand.response_to(request, 0, ext_fields={"stray": "yes"})
        stray.opaque = request.opaque + 1000
        connection.send(stray)
        return RemotingCommand.response_to(request, 0, ext_fields={"real": "yes"})

    server = await make_server(  # type: ignore[misc]
        {ECHO: echo(), SILENT: silent, HANG_UP: hang_up, CHATTY: chatty}
    )
    return f"127.0.0.1:{server.port}"


async def test_a_request_gets_its_answer_and_the_channel_serves_again(
    make_server: Callable[..., RemotingServer],
) -> None:
    address = await server_with_handlers(make_server)
    channel = await asyncio.to_thread(BlockingChannel, address, DEADLINE)
    try:
        first = RemotingCommand.request(ECHO, {"a": "1"}, body=b"x" * 100)
        first.flag = 3  # response and oneway bits: a request clears them
        answer = await asyncio.to_thread(channel.request, first, DEADLINE)
        assert answer.opaque == first.opaque != 0 and first.flag == 0
        assert answer.ext_fields == {"a": "1"} and answer.body == b"x" * 100
        large = RemotingCommand.request(ECHO, {}, body=b"y" * (64 << 10))
        again = await asyncio.to_thread(channel.request, large, DEADLINE)
        assert again.body == large.body and again.opaque != answer.opaque
    finally:
        channel.close()


async def test_frames_other_than_the_answer_are_skipped(
    make_server: Callable[..., RemotingServer],
) -> None:
    address = await server_with_handlers(make_server)
    channel = await asyncio.to_thread(BlockingChannel, address, DEADLINE)
    try:
        answer = await asyncio.to_thread(
            channel.request, RemotingCommand.request(CHATTY, {}), DEADLINE
        )
        assert answer.ext_fields == {"real": "yes"}
        follow_up = await asyncio.to_thread(
            channel.request, RemotingCommand.request(ECHO, {"n": "2"}), DEADLINE
        )
        assert follow_up.ext_fields == {"n": "2"}
    finally:
        channel.close()


async def test_no_answer_in_time_is_a_timeout_and_closes_the_channel(
    make_server: Callable[..., RemotingServer],
) -> None:
    address = await server_with_handlers(make_server)
    channel = await asyncio.to_thread(BlockingChannel, address, DEADLINE)
    with pytest.raises(RemotingTimeoutError, match=r"got no response within 0\.2s"):
        await asyncio.to_thread(channel.request, RemotingCommand.request(SILENT, {}), 0.2)
    assert channel.closed
    with pytest.raises(RemotingClosedError):
        await asyncio.to_thread(channel.request, RemotingCommand.request(ECHO, {}), DEADLINE)


async def test_a_peer_that_hangs_up_fails_the_request(
    make_server: Callable[..., RemotingServer],
) -> None:
    address = await server_with_handlers(make_server)
    channel = await asyncio.to_thread(BlockingChannel, address, DEADLINE)
    with pytest.raises(RemotingClosedError):
        await asyncio.to_thread(channel.request, RemotingCommand.request(HANG_UP, {}), DEADLINE)
    assert channel.closed


def test_an_address_nobody_listens_on_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RemotingConnectError, match=r"connect to 127\.0\.0\.1"):
        BlockingChannel(f"127.0.0.1:{port}", DEADLINE)
    with pytest.raises(RemotingConnectError, match="host:port"):
        BlockingChannel("no-port", DEADLINE)


async def test_channels_are_reused_bounded_per_address_and_closed(
    make_server: Callable[..., RemotingServer],
) -> None:
    address = await server_with_handlers(make_server)
    channels = BlockingChannels(per_address=2)
    first = await asyncio.to_thread(channels.acquire, address, DEADLINE)
    second = await asyncio.to_thread(channels.acquire, address, DEADLINE)
    assert first is not None and second is not None and first is not second
    assert channels.acquire(address, DEADLINE) is None  # both busy: the caller goes elsewhere
    assert channels.open_count(address) == 2
    channels.release(first)
    assert channels.acquire(address, DEADLINE) is first
    channels.release(first)
    with pytest.raises(RemotingTimeoutError):
        await asyncio.to_thread(second.request, RemotingCommand.request(SILENT, {}), 0.1)
    channels.release(second)  # failed: closed, not kept
    assert channels.open_count(address) == 1
    busy = channels.acquire(address, DEADLINE)
    assert busy is first
    channels.close()
    assert not busy.closed  # busy: closed when given back
    channels.release(busy)
    assert first.closed
    assert channels.open_count(address) == 0
    assert channels.acquire(address, DEADLINE) is None
    with pytest.raises(ValueError):
        BlockingChannels(per_address=0)


async def test_an_idle_channel_whose_peer_closed_it_is_not_reused(
    make_server: Callable[..., RemotingServer],
) -> None:
    server = await make_server({ECHO: echo()})  # type: ignore[misc]
    address = f"127.0.0.1:{server.port}"
    channels = BlockingChannels(per_address=1)
    channel = await asyncio.to_thread(channels.acquire, address, DEADLINE)
    assert channel is not None
    await asyncio.to_thread(channel.request, RemotingCommand.request(ECHO, {}), DEADLINE)
    channels.release(channel)
    assert channel.still_open()
    await server.stop(grace=1.0)  # closes the connection; nobody listens any more
    await eventually(lambda: not channel.still_open(), "the peer's close to arrive")
    with pytest.raises(RemotingConnectError):  # a new channel is tried, not the stale one
        await asyncio.to_thread(channels.acquire, address, DEADLINE)
    assert channel.closed
    assert channels.open_count(address) == 0
