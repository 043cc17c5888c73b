"""RemotingClient over real loopback sockets: pooling, opaques, timeouts, reconnects, close."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import pytest
from transport_helpers import echo

from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport import (
    Connection,
    OpaqueAllocator,
    RemotingClient,
    RemotingClosedError,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
    parse_address,
)
from tidemq.transport.connection import OPAQUE_LIMIT
from tidemq.transport.ports import free_port, wait_listening

ServerFactory = Callable[..., Awaitable[RemotingServer]]
ClientFactory = Callable[..., RemotingClient]

FAST, HOLD, DROP, RECORD = 1, 3, 5, 6


def test_opaques_start_at_one_and_wrap_below_the_limit() -> None:
    opaques = OpaqueAllocator()
    assert [opaques.allocate() for _ in range(3)] == [1, 2, 3]
    opaques._next = OPAQUE_LIMIT - 2
    assert [opaques.allocate() for _ in range(3)] == [OPAQUE_LIMIT - 2, OPAQUE_LIMIT - 1, 1]
    assert OPAQUE_LIMIT == 2**31 - 10


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:9876", ("127.0.0.1", 9876)), ("[::1]:10911", ("::1", 10911))],
)
def test_parse_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["127.0.0.1", ":80", "host:", "host:x", "host:70000", ""])
def test_parse_address_rejects(address: str) -> None:
    with pytest.raises(ValueError):
        parse_address(address)


async def test_one_pooled_connection_per_address_and_opaques_per_client(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    opaques: list[int] = []

    async def record(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        opaques.append(req.opaque)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    first = await make_server({RECORD: record})
    second = await make_server({RECORD: record})
    client = make_client()
    calls = [
        client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(RECORD))
        for server in (first, second)
        for _ in range(5)
    ]
    await asyncio.gather(*calls)
    assert len(first.connections) == len(second.connections) == 1
    assert sorted(opaques) == list(range(1, 11))
    assert set(client.connections) == {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}


async def test_the_callers_command_is_not_modified(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({FAST: echo()})
    client = make_client()
    command = RemotingCommand.request(FAST, {"a": "1"})
    await client.invoke(f"127.0.0.1:{server.port}", command)
    assert (command.opaque, command.flag) == (0, 0)


async def test_a_timeout_leaves_the_connection_usable(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    release = asyncio.Event()

    async def hold(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        await release.wait()
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({HOLD: hold, FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(address, RemotingCommand.request(HOLD), timeout=0.1)
    connection = await client.connect(address)
    assert connection.pending == 0
    response = await client.invoke(address, RemotingCommand.request(FAST, body=b"x"))
    assert response.body == b"x"
    # The late answer to the timed-out call arrives and is dropped quietly.
    release.set()
    await eventually(lambda: server.in_flight == 0, "the held call to finish")
    assert (await client.invoke(address, RemotingCommand.request(FAST))).code == 0
    assert await client.connect(address) is connection and not connection.closed


async def test_the_client_reconnects_after_the_server_closed_the_connection(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    await client.invoke(address, RemotingCommand.request(FAST))
    old = await client.connect(address)
    [server_side] = server.connections
    server_side.close()
    await eventually(lambda: old.closed, "the client to see the close")

    response = await client.invoke(address, RemotingCommand.request(FAST, body=b"again"))
    assert response.body == b"again"
    new = await client.connect(address)
    assert new is not old and new.local != old.local


async def test_a_dead_connection_fails_its_pending_calls(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    async def hang_up(_req: RemotingCommand, conn: Connection) -> None:
        conn.close()

    server = await make_server({DROP: hang_up})
    client = make_client()
    with pytest.raises(RemotingClosedError):
        await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(DROP), timeout=5)


async def test_connect_failures_raise_connect_error(make_client: ClientFactory) -> None:
    client = make_client(connect_timeout=2.0)
    with pytest.raises(RemotingConnectError, match="failed"):
        await client.invoke(f"127.0.0.1:{free_port()}", RemotingCommand.request(FAST))
    with pytest.raises(RemotingConnectError, match="host:port"):
        await client.invoke("no-port", RemotingCommand.request(FAST))


async def test_invoke_oneway_sets_the_flag_and_does_not_wait(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    seen: list[RemotingCommand] = []

    async def record(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        seen.append(req)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({RECORD: record})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    await client.invoke_oneway(address, RemotingCommand.request(RECORD, {"commitOffset": "5"}))
    await eventually(lambda: len(seen) == 1, "the oneway request")
    assert seen[0].is_oneway and seen[0].opaque == 1
    assert seen[0].ext_fields == {"commitOffset": "5"}
    assert (await client.connect(address)).pending == 0


async def test_close_fails_pending_calls_and_refuses_new_ones(
    make_server: ServerFactory,
) -> None:
    started = asyncio.Event()

    async def hold(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        started.set()
        await asyncio.Event().wait()  # never set: held until the server stops
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({HOLD: hold})
    address = f"127.0.0.1:{server.port}"
    client = RemotingClient()
    call = asyncio.create_task(client.invoke(address, RemotingCommand.request(HOLD), timeout=30))
    await started.wait()
    await client.close()
    with pytest.raises(RemotingClosedError):
        await call
    with pytest.raises(RemotingClosedError):
        await client.invoke(address, RemotingCommand.request(HOLD))
    await eventually(lambda: not server.connections, "the server to see the close")


async def test_the_client_handler_task_is_cancelled_on_close(
    make_server: ServerFactory,
) -> None:
    entered = asyncio.Event()
    cancelled: list[bool] = []

    async def slow_client_side(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        entered.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    async def push(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        conn.send_oneway(RemotingCommand.request(40))
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: push})
    async with RemotingClient(request_handler=slow_client_side) as client:
        await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(FAST))
        await entered.wait()
    assert cancelled == [True]


def test_wait_listening_sees_a_listener_and_gives_up_at_its_deadline() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        assert wait_listening(port, time.monotonic() + HANG_GUARD_S)
    assert not wait_listening(free_port(), time.monotonic())  # nobody there, no time left
