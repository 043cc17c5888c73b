"""RemotingServer over real loopback sockets: concurrency, bounds, errors, bad frames, stop."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Awaitable, Callable

import pytest
from transport_helpers import RawPeer, echo

from tidemq.protocol import (
    HeaderError,
    ProtocolError,
    RemotingCommand,
    ResponseCode,
    SerializeType,
    encode_frame,
)
from tidemq.protocol.headers import GetRouteInfoRequestHeader, decode_header
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport import (
    Connection,
    RemotingClient,
    RemotingClosedError,
    RemotingServer,
    RemotingTimeoutError,
)

ServerFactory = Callable[..., Awaitable[RemotingServer]]
ClientFactory = Callable[..., RemotingClient]
PeerFactory = Callable[[int], Awaitable[RawPeer]]

FAST, SLOW, HOLD, FAIL = 1, 2, 3, 4


def request(code: int, opaque: int, *, oneway: bool = False, body: bytes = b"") -> bytes:
    return RemotingCommand.request(code, body=body, opaque=opaque, oneway=oneway).encode()


async def test_a_slow_handler_does_not_hold_back_a_fast_one_on_the_same_connection(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    release = asyncio.Event()

    async def slow(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        await release.wait()
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"slow")

    server = await make_server({SLOW: slow, FAST: echo()})
    peer = await raw_peers(server.port)
    await peer.send(request(SLOW, 1) + request(FAST, 2))

    first = await peer.read_command()
    assert (first.opaque, first.is_response) == (2, True)
    release.set()
    second = await peer.read_command()
    assert (second.opaque, second.code, second.body) == (1, ResponseCode.SUCCESS, b"slow")


async def test_out_of_order_answers_reach_their_own_callers(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    answered = [asyncio.Event() for _ in range(21)]
    answered[20].set()

    async def delayed(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        # Later requests answer first: each waits until the next one has answered.
        index = int(req.ext_fields["index"])
        await answered[index + 1].wait()
        answered[index].set()
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=req.body)

    server = await make_server({SLOW: delayed})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    calls = [
        client.invoke(
            address, RemotingCommand.request(SLOW, {"index": str(i)}, body=b"m%d" % i), timeout=5
        )
        for i in range(20)
    ]
    responses = await asyncio.gather(*calls)
    assert [r.body for r in responses] == [b"m%d" % i for i in range(20)]
    assert len(server.connections) == 1


async def test_requests_beyond_max_in_flight_get_system_busy_at_once(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def hold(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        started.append(req.opaque)
        await release.wait()
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({HOLD: hold}, max_in_flight=2)
    peer = await raw_peers(server.port)
    await peer.send(request(HOLD, 1) + request(HOLD, 2) + request(HOLD, 3))

    busy = await peer.read_command()
    assert (busy.opaque, busy.code) == (3, ResponseCode.SYSTEM_BUSY)
    assert busy.remark is not None and "busy" in busy.remark and "limit 2" in busy.remark
    assert started == [1, 2]
    release.set()
    answered = {(await peer.read_command()).opaque for _ in range(2)}
    assert answered == {1, 2}
    # The slots are free again.
    await eventually(lambda: server.in_flight == 0, "the slots to be free")
    await peer.send(request(HOLD, 4))
    assert (await peer.read_command()).code == ResponseCode.SUCCESS


async def test_unknown_code_is_answered_like_java(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server({FAST: echo()})
    peer = await raw_peers(server.port)
    await peer.send(request(999, 77))
    response = await peer.read_command()
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 999 not supported"
    assert (response.opaque, response.flag) == (77, 1)


async def test_the_answer_uses_the_request_serialize_type(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server({FAST: echo()})
    peer = await raw_peers(server.port)
    binary = RemotingCommand.request(
        FAST, {"k": "v"}, opaque=5, serialize_type=SerializeType.ROCKETMQ
    ).encode()
    await peer.send(binary)
    response = await peer.read_command()
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert (response.opaque, response.ext_fields) == (5, {"k": "v"})
    await peer.send(request(FAST, 6))
    assert (await peer.read_command()).serialize_type == SerializeType.JSON


async def test_an_answer_always_echoes_the_opaque_and_sets_the_response_flag(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    async def careless(_req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return RemotingCommand(code=ResponseCode.SUCCESS, opaque=0, flag=0)

    server = await make_server({FAST: careless})
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 41))
    response = await peer.read_command()
    assert (response.opaque, response.is_response) == (41, True)


@pytest.mark.parametrize(
    "error",
    [
        HeaderError("GetRouteInfoRequestHeader", "topic", "is missing"),
        ProtocolError("bad body"),
        ValueError("queueId out of range"),
    ],
)
async def test_value_errors_become_system_error_with_their_text(
    make_server: ServerFactory, make_client: ClientFactory, error: ValueError
) -> None:
    async def fail(_req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        raise error

    server = await make_server({FAIL: fail, FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    response = await client.invoke(address, RemotingCommand.request(FAIL))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, str(error))
    assert (await client.invoke(address, RemotingCommand.request(FAST))).code == 0


async def test_a_real_header_error_from_decode_header_reaches_the_caller(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    async def route(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        header = decode_header(GetRouteInfoRequestHeader, req.ext_fields)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=header.topic.encode())

    server = await make_server({105: route})
    client = make_client()
    response = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(105))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "topic" in response.remark


async def test_other_exceptions_are_logged_and_the_server_keeps_serving(
    make_server: ServerFactory, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async def crash(_req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        raise RuntimeError("boom")

    server = await make_server({FAIL: crash, FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    with caplog.at_level(logging.ERROR, logger="tidemq.transport"):
        response = await client.invoke(address, RemotingCommand.request(FAIL))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "RuntimeError: boom"
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    ok = await client.invoke(address, RemotingCommand.request(FAST, body=b"still here"))
    assert (ok.code, ok.body) == (0, b"still here")


def bad_json_frame() -> bytes:
    return encode_frame(SerializeType.JSON, b'{"code": 1, "opaque": ', b"")


def oversized_declared_length() -> bytes:
    return struct.pack(">iI", 17 * 1024 * 1024, 20) + b"x" * 20


def header_not_an_object() -> bytes:
    return encode_frame(SerializeType.JSON, json.dumps([1, 2]).encode(), b"")


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        oversized_declared_length(),
        bad_json_frame(),
        header_not_an_object(),
        struct.pack(">iI", 10, 0x05000002) + b"{}xxxx",  # unknown serialize type 5
    ],
    ids=["http", "17MiB-length", "bad-json", "json-array", "serialize-type-5"],
)
async def test_a_malformed_frame_closes_only_that_connection(
    make_server: ServerFactory,
    make_client: ClientFactory,
    raw_peers: PeerFactory,
    garbage: bytes,
) -> None:
    server = await make_server({FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    assert (await client.invoke(address, RemotingCommand.request(FAST))).code == 0

    bad = await raw_peers(server.port)
    await bad.send(garbage)
    assert await bad.wait_eof() == b""

    assert (await client.invoke(address, RemotingCommand.request(FAST, body=b"ok"))).body == b"ok"
    await eventually(lambda: len(server.connections) == 1, "the bad peer's connection gone")


async def test_oneway_requests_run_but_get_no_reply(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    seen: list[tuple[int, bool]] = []

    async def record(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        seen.append((req.opaque, req.is_oneway))
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: record})
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 1, oneway=True) + request(FAST, 2))
    response = await peer.read_command()
    assert response.opaque == 2
    assert sorted(seen) == [(1, True), (2, False)]
    # Nothing else arrives: the server answers the next request, not the oneway one.
    await peer.send(request(FAST, 3))
    assert (await peer.read_command()).opaque == 3


async def test_a_handler_returning_none_sends_nothing(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    async def silent(_req: RemotingCommand, _conn: Connection) -> None:
        return None

    server = await make_server({SLOW: silent, FAST: echo()})
    peer = await raw_peers(server.port)
    await peer.send(request(SLOW, 1) + request(FAST, 2))
    assert (await peer.read_command()).opaque == 2


async def test_answer_now_sends_after_what_was_queued_and_never_for_oneway(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    async def at_once(req: RemotingCommand, conn: Connection) -> None:
        conn.send(RemotingCommand.request(SLOW, {"push": "first"}, oneway=True))
        conn.answer_now(req, RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"now"))
        return None

    server = await make_server({HOLD: at_once, FAST: echo()})
    peer = await raw_peers(server.port)
    await peer.send(request(HOLD, 7))
    push = await peer.read_command()
    assert push.ext_fields == {"push": "first"} and not push.is_response
    answer = await peer.read_command()
    assert (answer.opaque, answer.is_response, answer.body) == (7, True, b"now")
    await peer.send(request(HOLD, 8, oneway=True) + request(FAST, 9))
    assert (await peer.read_command()).ext_fields == {"push": "first"}
    assert (await peer.read_command()).opaque == 9  # no answer to the oneway request 8


async def test_server_to_client_request_and_response(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    async def ask_back(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        answer = await conn.request(RemotingCommand.request(39, {"q": "state?"}), timeout=5)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=answer.body)

    async def client_side(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        assert req.code == 39
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"COMMIT")

    server = await make_server({FAST: ask_back})
    client = make_client(request_handler=client_side)
    response = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(FAST))
    assert response.body == b"COMMIT"


async def test_a_client_without_handler_answers_not_supported_and_ignores_oneway(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    got: list[RemotingCommand] = []

    async def ask_back(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        conn.send_oneway(RemotingCommand.request(40, {"consumerGroup": "g"}))
        got.append(await conn.request(RemotingCommand.request(307), timeout=5))
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: ask_back})
    client = make_client()
    await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(FAST))
    [answer] = got
    assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answer.remark == " request type 307 not supported"
    [connection] = server.connections
    assert connection.pending == 0


async def test_a_oneway_push_from_the_server_reaches_the_client_handler(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    pushed: list[RemotingCommand] = []

    async def on_push(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        pushed.append(req)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: echo()})
    client = make_client(request_handler=on_push)
    await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(FAST))
    [connection] = server.connections
    connection.send(RemotingCommand.request(40, {"consumerGroup": "g"}, oneway=True))
    await eventually(lambda: len(pushed) == 1, "the pushed request")
    assert pushed[0].ext_fields == {"consumerGroup": "g"}
    assert pushed[0].is_oneway


async def test_server_side_request_times_out_without_closing(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    outcome: list[str] = []

    async def ask_back(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            await conn.request(RemotingCommand.request(307), timeout=0.05)
        except RemotingTimeoutError:
            outcome.append("timeout")
        outcome.append("closed" if conn.closed else "open")
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: ask_back})
    peer = await raw_peers(server.port)  # never answers the server's request
    await peer.send(request(FAST, 1))
    pushed = await peer.read_command()
    assert (pushed.code, pushed.is_response) == (307, False)
    response = await peer.read_command()
    assert response.opaque == 1
    assert outcome == ["timeout", "open"]


async def test_on_close_runs_once_per_connection(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    closed: list[Connection] = []
    server = await make_server({FAST: echo()}, on_close=closed.append)
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 1))
    await peer.read_command()
    [connection] = server.connections
    assert connection.remote[0] == "127.0.0.1"
    assert connection.local == ("127.0.0.1", server.port)
    await peer.close()
    await eventually(lambda: closed == [connection], "on_close for the connection")
    assert connection.closed and not server.connections
    await server.stop()
    assert closed == [connection]


async def test_stop_waits_for_an_in_flight_handler(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    finished: list[bool] = []

    async def slow(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        started.set()
        await release.wait()
        finished.append(True)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"done")

    server = await make_server({SLOW: slow, FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    call = asyncio.create_task(client.invoke(address, RemotingCommand.request(SLOW), timeout=5))
    await started.wait()
    stopping = asyncio.create_task(server.stop(grace=5))
    # While stopping, new requests on the open connection are refused politely...
    busy = await client.invoke(address, RemotingCommand.request(FAST), timeout=5)
    assert busy.code == ResponseCode.SYSTEM_BUSY
    assert busy.remark is not None and "shutting down" in busy.remark
    assert not stopping.done()  # stop waits for the held handler ...
    release.set()
    # ...and the in-flight one completes before the connection goes.
    response = await call
    assert (response.code, response.body) == (0, b"done")
    await stopping
    assert finished == [True]
    assert not server.connections
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", server.port)


async def test_stop_cancels_handlers_that_outlive_the_grace(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def stuck(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        started.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({HOLD: stuck})
    client = make_client()
    call = asyncio.create_task(
        client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(HOLD), timeout=30)
    )
    await started.wait()
    async with asyncio.timeout(HANG_GUARD_S):  # a stop that waited for the handler would hang
        await server.stop(grace=0.1)
    assert cancelled == [True]
    with pytest.raises(RemotingClosedError):
        await call


async def test_a_peer_that_stops_reading_is_cut_off_at_the_write_buffer_bound(
    make_server: ServerFactory,
    make_client: ClientFactory,
    raw_peers: PeerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[Connection] = []
    server = await make_server({FAST: echo()}, max_write_buffer=1024 * 1024, on_close=closed.append)
    peer = await raw_peers(server.port)  # sends, never reads
    body = b"x" * (1024 * 1024)
    with caplog.at_level(logging.WARNING, logger="tidemq.transport"):
        for opaque in range(1, 33):
            try:
                await peer.send(request(FAST, opaque, body=body))
            except ConnectionError:
                break
            if closed:
                break
        await eventually(lambda: len(closed) == 1, "the non-reading peer cut off")
    assert any("does not read" in r.getMessage() for r in caplog.records)
    client = make_client()
    response = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(FAST))
    assert response.code == ResponseCode.SUCCESS


async def test_a_closed_connection_drops_sends_and_refuses_requests(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({FAST: echo()})
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    connection = await client.connect(address)
    connection.close()
    assert connection.closed
    connection.send(RemotingCommand.request(FAST))  # silently dropped
    with pytest.raises(RemotingClosedError):
        await connection.request(RemotingCommand.request(FAST), timeout=1)
    with pytest.raises(RemotingClosedError):
        connection.send_oneway(RemotingCommand.request(FAST))
    assert await connection.wait_closed(timeout=5)
    assert (await client.invoke(address, RemotingCommand.request(FAST))).code == 0


async def test_new_handlers_serve_the_next_requests(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    async def first(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"first")

    async def second(req: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=b"second")

    server = await make_server({FAST: first})
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 1))
    assert (await peer.read_command()).body == b"first"
    server.use_handlers({FAST: second})
    await peer.send(request(FAST, 2))
    assert (await peer.read_command()).body == b"second"
    await peer.send(request(SLOW, 3))
    assert (await peer.read_command()).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
