"""The two tidemq transaction extensions against a real `tidemq serve`:
TIDEMQ_SEND_HALF_BATCH stores many halves in one request (out of sight like
single halves) and TIDEMQ_END_TRANSACTIONS ends many in one append, checking
every half first, skipping the resolved ones, keeping the given order. The
exactly-once Spark sink is built on them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import AsyncProducer, make_message
from tidemq.common import properties as props
from tidemq.common.message_id import decode_offset_message_id
from tidemq.protocol import RequestCode, ResponseCode
from tidemq.testing.client_support import create_topic, read_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import unique_name

pytestmark = pytest.mark.slow

GROUP = "BatchTxGroup"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("tx-batches") / "data", flush="sync") as process:
        yield process


async def end(
    server: ServerProcess, items: list[list[object]], group: str = GROUP, body: bytes | None = None
) -> tuple[int, str | None, dict[str, str]]:
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        response = await instance.invoke(
            server.broker,
            RequestCode.TIDEMQ_END_TRANSACTIONS,
            {"producerGroup": group},
            body=body if body is not None else json.dumps({"items": items}).encode(),
        )
    finally:
        await instance.close()
    return response.code, response.remark, dict(response.ext_fields)


def items_of(result: object, commits: list[bool]) -> list[list[object]]:
    offset_ids = result.offset_msg_id.split(",")  # type: ignore[attr-defined]
    first = result.queue_offset  # type: ignore[attr-defined]
    return [
        [decode_offset_message_id(oid)[2], first + i, commit]
        for i, (oid, commit) in enumerate(zip(offset_ids, commits, strict=True))
    ]


async def test_half_batch_then_batch_end_in_order(server: ServerProcess) -> None:
    topic = unique_name("HalfBatch")
    queue = (await create_topic(server.namesrv, topic, queues=1))[0]
    async with AsyncProducer(GROUP, server.namesrv) as producer:
        messages = [make_message(topic, f"h{i}", keys=f"k{i}") for i in range(6)]
        result = await producer.send_halves(messages, queue)
    assert result.status == "SEND_OK"
    assert len(result.msg_id.split(",")) == 6
    assert await read_topic(server.namesrv, topic) == []  # out of sight
    commits = [True, False, True, True, False, True]
    code, _, fields = await end(server, items_of(result, commits))
    assert (code, fields["ended"], fields["resolvedBefore"]) == (ResponseCode.SUCCESS, "6", "0")
    stored = await read_topic(server.namesrv, topic)
    assert [m.body for m in stored] == [b"h0", b"h2", b"h3", b"h5"]  # in the order given
    assert [m.keys for m in stored] == [["k0"], ["k2"], ["k3"], ["k5"]]
    assert all(m.properties[props.PGROUP] == GROUP for m in stored)
    # ending them again changes nothing
    code, _, fields = await end(server, items_of(result, [True] * 6))
    assert (code, fields["ended"], fields["resolvedBefore"]) == (ResponseCode.SUCCESS, "0", "6")
    assert len(await read_topic(server.namesrv, topic)) == 4


async def test_one_bad_half_refuses_the_whole_request(server: ServerProcess) -> None:
    topic = unique_name("HalfBatchBad")
    queue = (await create_topic(server.namesrv, topic, queues=1))[0]
    async with AsyncProducer(GROUP, server.namesrv) as producer:
        result = await producer.send_halves(
            [make_message(topic, "a"), make_message(topic, "b")], queue
        )
    good = items_of(result, [True, True])
    forged = [good[0][0] + 1, good[0][1], True]
    code, remark, _ = await end(server, [good[0], forged])
    assert code == ResponseCode.SYSTEM_ERROR and "prepared transaction" in (remark or "")
    wrong_group = await end(server, good, group="SomeoneElse")
    assert wrong_group[0] == ResponseCode.SYSTEM_ERROR
    assert await read_topic(server.namesrv, topic) == []  # nothing was committed
    for body in (b"{", b'{"items": [[1, 2]]}', b"[]"):
        code, remark, _ = await end(server, [], body=body)
        assert code == ResponseCode.MESSAGE_ILLEGAL and "items" in (remark or "")
    code, _, fields = await end(server, good)
    assert (code, fields["ended"]) == (ResponseCode.SUCCESS, "2")
    assert sorted(m.body for m in await read_topic(server.namesrv, topic)) == [b"a", b"b"]


async def test_half_batches_refuse_timer_messages(server: ServerProcess) -> None:
    topic = unique_name("HalfBatchTimer")
    queue = (await create_topic(server.namesrv, topic, queues=1))[0]
    async with AsyncProducer(GROUP, server.namesrv) as producer:
        timed = make_message(topic, "later", deliver_after=60)
        with pytest.raises(ClientError, match="delivery time") as refused:
            await producer.send_halves([make_message(topic, "now"), timed], queue)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await read_topic(server.namesrv, topic) == []
