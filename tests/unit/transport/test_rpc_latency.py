"""A server with RpcStats times every answer (rocketmq_rpc_latency): by request
code and response code, a held answer as long polling, a oneway apart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from transport_helpers import RawPeer, echo

from tidemq.common.rpc_stats import RpcStats
from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.testing.waiting import eventually
from tidemq.transport import Connection, RemotingServer

ServerFactory = Callable[..., Awaitable[RemotingServer]]
PeerFactory = Callable[[int], Awaitable[RawPeer]]

FAST, HELD, ONEWAY = 1, 2, 3


def request(code: int, opaque: int, *, oneway: bool = False) -> bytes:
    return RemotingCommand.request(code, opaque=opaque, oneway=oneway).encode()


async def test_answers_are_timed_by_request_and_response_code(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    release = asyncio.Event()

    async def held(req: RemotingCommand, connection: Connection) -> None:
        async def later() -> None:
            await release.wait()
            connection.answer_now(req, RemotingCommand.response_to(req, ResponseCode.SUCCESS))

        asyncio.get_running_loop().create_task(later())
        return None

    stats = RpcStats("remoting", str, str)
    handlers = {FAST: echo(ResponseCode.TOPIC_NOT_EXIST), HELD: held, ONEWAY: echo()}
    server = await make_server(handlers, rpc_stats=stats)
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 1) + request(FAST, 2) + request(HELD, 3))
    await peer.send(request(ONEWAY, 4, oneway=True))
    assert {(await peer.read_command()).opaque for _ in range(2)} == {1, 2}
    release.set()
    assert (await peer.read_command()).opaque == 3
    await eventually(lambda: len(stats.table) == 3, "three kinds of answers timed")
    counts = {key: histogram.count for key, histogram in stats.table.items()}
    assert counts == {
        (FAST, ResponseCode.TOPIC_NOT_EXIST, False, False): 2,
        (HELD, ResponseCode.SUCCESS, True, False): 1,
        (ONEWAY, ResponseCode.SUCCESS, False, True): 1,
    }
    held = stats.table[(HELD, ResponseCode.SUCCESS, True, False)]
    fast = stats.table[(FAST, ResponseCode.TOPIC_NOT_EXIST, False, False)]
    # timed from its decoding (with the fast ones) to its answer (after theirs)
    assert held.total >= fast.total / fast.count > 0.0


async def test_without_rpc_stats_nothing_is_stamped(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    seen: list[float] = []

    async def handler(req: RemotingCommand, _connection: Connection) -> RemotingCommand:
        seen.append(req.received_at)
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    server = await make_server({FAST: handler})
    peer = await raw_peers(server.port)
    await peer.send(request(FAST, 1))
    await peer.read_command()
    assert seen == [0.0]
