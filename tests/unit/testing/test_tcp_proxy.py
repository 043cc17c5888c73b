"""tcp_proxy's four modes on a real loopback link to an echo server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tidemq.testing.tcp_proxy import TcpProxy
from tidemq.testing.waiting import HANG_GUARD_S, eventually


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.transport.abort()


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with TcpProxy(f"127.0.0.1:{port}") as proxy:
        yield proxy
    server.close()
    await server.wait_closed()


async def _dial(
    proxy: TcpProxy,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = proxy.address.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def _round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), HANG_GUARD_S)


async def test_pass_forwards_both_ways(proxy: TcpProxy) -> None:
    reader, writer = await _dial(proxy)
    assert await _round_trip(reader, writer, b"hello" * 10_000) == b"hello" * 10_000
    assert proxy.forwarded_bytes == 2 * 50_000
    writer.close()


async def test_drop_resets_open_links_and_refuses_new_ones(proxy: TcpProxy) -> None:
    reader, writer = await _dial(proxy)
    assert await _round_trip(reader, writer, b"x") == b"x"
    proxy.drop()
    assert await asyncio.wait_for(reader.read(1), HANG_GUARD_S) == b""  # reset
    writer.close()
    reader, writer = await _dial(proxy)  # accepted, then closed at once
    assert await asyncio.wait_for(reader.read(1), HANG_GUARD_S) == b""
    writer.close()
    proxy.pass_through()
    reader, writer = await _dial(proxy)
    assert await _round_trip(reader, writer, b"back") == b"back"
    writer.close()


async def test_blackhole_holds_everything_and_healing_delivers_it_intact(
    proxy: TcpProxy,
) -> None:
    reader, writer = await _dial(proxy)
    assert await _round_trip(reader, writer, b"before") == b"before"
    proxy.blackhole()
    forwarded = proxy.forwarded_bytes
    writer.write(b"during")
    await writer.drain()
    late_reader, late_writer = await _dial(proxy)  # accepted, not connected onwards
    late_writer.write(b"late")
    await late_writer.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(6), 0.5)  # nothing crosses
    assert proxy.forwarded_bytes == forwarded
    assert proxy.connections == 2
    proxy.pass_through()
    assert await asyncio.wait_for(reader.readexactly(6), HANG_GUARD_S) == b"during"
    assert await asyncio.wait_for(late_reader.readexactly(4), HANG_GUARD_S) == b"late"
    writer.close()
    late_writer.close()


async def test_cut_aborts_once_and_the_host_port_form_works() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with TcpProxy("127.0.0.1", port) as proxy:
        reader, writer = await _dial(proxy)
        assert await _round_trip(reader, writer, b"x") == b"x"
        proxy.cut()
        assert await asyncio.wait_for(reader.read(1), HANG_GUARD_S) == b""
        writer.close()
        reader, writer = await _dial(proxy)  # the next connection goes through
        assert await _round_trip(reader, writer, b"y") == b"y"
        assert proxy.address == f"127.0.0.1:{proxy.port}"
        writer.close()
    server.close()
    await server.wait_closed()


async def test_delay_forwards_in_order_that_much_later(proxy: TcpProxy) -> None:
    reader, writer = await _dial(proxy)
    proxy.delay(0.3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for part in (b"a", b"b", b"c"):
        writer.write(part)
        await writer.drain()
    assert await asyncio.wait_for(reader.readexactly(3), HANG_GUARD_S) == b"abc"
    assert loop.time() - started >= 0.3 * 2  # there and back, each 0.3 s late
    writer.close()
    proxy.pass_through()
    await eventually(lambda: proxy.connections == 0, "the closed link gone")
    with pytest.raises(ValueError):
        proxy.delay(-1)
