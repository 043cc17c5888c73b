"""Broker over real sockets: send, pull, long polling, filters and bad input."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker_harness import Cluster, running_cluster

from tidemq.common.message import Message
from tidemq.common.message_id import offset_message_id
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.headers import (
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    ViewMessageRequestHeader,
    encode_header,
)
from tidemq.record.codec import decode_record, decode_records, encode_batch
from tidemq.testing.waiting import HANG_GUARD_S, eventually
from tidemq.transport import RemotingClient

HOUR_MS = 3_600_000
NO_RECHECK = {"long_polling_check_interval_s": 3600.0}
"""Held pulls are not re-checked within a test: only an arrival (or the timeout) answers them."""


async def test_send_then_pull_round_trip_with_matching_msg_id(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        sent = await c.send("TopicTest", "hello", queue_id=1, tags="TagA", keys="k1 k2")
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert sent.ext_fields["queueId"] == "1"
        assert sent.ext_fields["queueOffset"] == "0"
        pulled = await c.pull("TopicTest", 1, 0)
        assert pulled.code == ResponseCode.SUCCESS
        assert pulled.ext_fields["nextBeginOffset"] == "1"
        assert pulled.ext_fields["maxOffset"] == "1"
        assert pulled.ext_fields["minOffset"] == "0"
        assert pulled.ext_fields["suggestWhichBrokerId"] == "0"
        (message,) = decode_records(pulled.body)
        assert message.msg_id == sent.ext_fields["msgId"]
        assert message.body == b"hello"
        assert message.topic == "TopicTest"
        assert message.tags == "TagA"
        assert message.keys == ["k1", "k2"]
        assert message.properties["CLUSTER"] == "DefaultCluster"
        host, port = c.address.split(":")
        assert message.store_host == c.address
        assert message.msg_id == offset_message_id(
            bytes(int(x) for x in host.split(".")), int(port), message.commit_log_offset
        )


async def test_auto_created_topic_appears_in_the_name_server_route(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        assert await c.route("Fresh") is None
        assert (await c.send("Fresh", "x")).code == ResponseCode.SUCCESS
        route = await eventually(lambda: c.route("Fresh"), "the route of Fresh")
        (queue_data,) = route["queueDatas"]
        assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (4, 4)
        assert queue_data["perm"] == 6
        assert route["brokerDatas"][0]["brokerAddrs"]["0"] == c.address


async def test_without_auto_create_an_unknown_topic_is_refused(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, auto_create_topic=False) as c:
        sent = await c.send("Nope", "x")
        assert sent.code == ResponseCode.TOPIC_NOT_EXIST
        assert "Nope" in (sent.remark or "")


async def test_long_poll_is_answered_at_once_by_a_send(tmp_path: Path) -> None:
    # No re-check and an hour's hold: only the send's arrival can answer the pull in time.
    async with running_cluster(tmp_path, **NO_RECHECK) as c:
        assert (await c.send("LP", "first")).code == ResponseCode.SUCCESS
        held = asyncio.create_task(c.pull("LP", 0, 1, suspend_ms=HOUR_MS))
        await eventually(lambda: _held(c, "LP"), "the pull to be held")
        assert (await c.send("LP", "second")).code == ResponseCode.SUCCESS
        pulled = await asyncio.wait_for(held, HANG_GUARD_S)
        assert pulled.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(pulled.body)] == [b"second"]


async def _held(c: Cluster, topic: str) -> bool:
    return bool(c.broker.service.long_polling.held_for(topic, 0))


async def test_long_poll_times_out_with_pull_not_found(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        assert (await c.send("LPT", "only")).code == ResponseCode.SUCCESS
        started = time.monotonic()
        pulled = await c.pull("LPT", 0, 1, suspend_ms=600)
        waited = time.monotonic() - started
        assert pulled.code == ResponseCode.PULL_NOT_FOUND
        assert pulled.ext_fields["nextBeginOffset"] == "1"
        assert waited >= 0.55, waited  # held for the suspend time


async def test_a_held_pull_does_not_block_a_send_on_the_same_connection(tmp_path: Path) -> None:
    # The pull is held for an hour: a send queued behind it would trip the hang guard.
    async with running_cluster(tmp_path, **NO_RECHECK) as c:
        assert (await c.send("Mux", "a")).code == ResponseCode.SUCCESS
        held = asyncio.create_task(c.pull("Mux", 0, 1, suspend_ms=HOUR_MS))
        await eventually(lambda: _held(c, "Mux"), "the pull to be held")
        other = await asyncio.wait_for(c.send("Mux", "b", queue_id=2), HANG_GUARD_S)
        assert other.code == ResponseCode.SUCCESS
        assert len(c.client.connections) == 1
        assert not held.done()
        assert (await c.send("Mux", "c")).code == ResponseCode.SUCCESS
        pulled = await asyncio.wait_for(held, HANG_GUARD_S)
        assert pulled.code == ResponseCode.SUCCESS


async def test_tag_filtering_on_pull_and_on_held_pulls(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        for tag in ("TagA", "TagB", "TagC", "TagB"):
            assert (await c.send("Tags", tag, tags=tag)).code == ResponseCode.SUCCESS
        pulled = await c.pull("Tags", 0, 0, subscription="TagA || TagC")
        assert pulled.code == ResponseCode.SUCCESS
        assert [m.tags for m in decode_records(pulled.body)] == ["TagA", "TagC"]
        assert pulled.ext_fields["nextBeginOffset"] == "4"
        only_b = await c.pull("Tags", 0, 3, subscription="TagA")
        assert only_b.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert only_b.ext_fields["nextBeginOffset"] == "4"
        # A held TagA pull is not woken by a TagB arrival, only by a TagA one.
        held = asyncio.create_task(c.pull("Tags", 0, 4, subscription="TagA", suspend_ms=10_000))
        await eventually(lambda: _held(c, "Tags"), "the pull to be held")
        assert (await c.send("Tags", "b", tags="TagB")).code == ResponseCode.SUCCESS
        # The store tells long polling of an arrival before the send is answered, so the
        # TagB arrival has been seen by now, and passed over: the pull is still held.
        assert await _held(c, "Tags")
        assert not held.done()
        assert (await c.send("Tags", "a", tags="TagA")).code == ResponseCode.SUCCESS
        pulled = await asyncio.wait_for(held, HANG_GUARD_S)
        assert [m.body for m in decode_records(pulled.body)] == [b"a"]


async def test_pull_unknown_topic_bad_queue_and_offsets_out_of_range(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        unknown = await c.pull("Unknown", 0, 0)
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
        assert "Unknown" in (unknown.remark or "")
        for _ in range(3):
            assert (await c.send("Range", "x")).code == ResponseCode.SUCCESS
        bad_queue = await c.pull("Range", 99, 0)
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR
        assert "queueId[99] is illegal" in (bad_queue.remark or "")
        beyond = await c.pull("Range", 0, 10)
        assert beyond.code == ResponseCode.PULL_OFFSET_MOVED
        assert beyond.ext_fields["nextBeginOffset"] == "3"
        at_end = await c.pull("Range", 0, 3)
        assert at_end.code == ResponseCode.PULL_NOT_FOUND
        assert at_end.ext_fields["nextBeginOffset"] == "3"
        empty_queue = await c.pull("Range", 1, 5)
        assert empty_queue.code == ResponseCode.PULL_OFFSET_MOVED
        assert empty_queue.ext_fields["nextBeginOffset"] == "0"
        empty_start = await c.pull("Range", 1, 0)
        assert empty_start.code == ResponseCode.PULL_NOT_FOUND


async def test_bad_input_is_refused_and_the_broker_keeps_serving(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        good = await c.send("Safe", "kept")
        assert good.code == ResponseCode.SUCCESS
        # Java's AbstractSendMessageProcessor.msgCheck: TopicValidator -> INVALID_PARAMETER
        invalid = await c.send("bad topic!", "x")
        assert invalid.code == ResponseCode.INVALID_PARAMETER
        assert "illegal characters" in (invalid.remark or "")
        too_long = await c.send("T" * 128, "x")
        assert too_long.code == ResponseCode.INVALID_PARAMETER
        huge = await c.send("Safe", b"\0" * (5 * 1024 * 1024))
        assert huge.code == ResponseCode.MESSAGE_ILLEGAL
        assert "5242880 bytes" in (huge.remark or "")
        forbidden = await c.send("SCHEDULE_TOPIC_XXXX", "x")
        assert forbidden.code == ResponseCode.NO_PERMISSION
        bad_queue = await c.send("Safe", "x", queue_id=64)
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR
        missing_field = await c.call(RequestCode.SEND_MESSAGE_V2, {"b": "Safe"}, b"x")
        assert missing_field.code == ResponseCode.SYSTEM_ERROR
        assert "'a'" in (missing_field.remark or "")
        unsupported = await c.call(9999, {})
        assert unsupported.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        # Nothing stored was harmed; the broker still serves.
        pulled = await c.pull("Safe", 0, 0)
        assert [m.body for m in decode_records(pulled.body)] == [b"kept"]
        assert (await c.send("Safe", "after")).code == ResponseCode.SUCCESS


async def test_batch_send_query_by_key_and_view_by_id(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        batch = encode_batch(
            [
                Message("Batch", b"one", properties={"KEYS": "order-1"}),
                Message("Batch", b"two", properties={"KEYS": "order-2"}),
            ]
        )
        header = SendMessageRequestHeaderV2(
            producer_group="PG",
            topic="Batch",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            batch=True,
        )
        ext = encode_header(header)
        sent = await c.call(RequestCode.SEND_BATCH_MESSAGE, ext, batch)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        ids = sent.ext_fields["msgId"].split(",")
        assert len(ids) == 2
        assert sent.ext_fields["queueOffset"] == "0"
        query = QueryMessageRequestHeader(
            topic="Batch", key="order-2", max_num=32, begin_timestamp=0, end_timestamp=2**62
        )
        found = await c.call(RequestCode.QUERY_MESSAGE, encode_header(query))
        assert found.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(found.body)] == [b"two"]
        assert "indexLastUpdateTimestamp" in found.ext_fields
        missing = QueryMessageRequestHeader(
            topic="Batch", key="nothing", max_num=32, begin_timestamp=0, end_timestamp=2**62
        )
        not_found = await c.call(RequestCode.QUERY_MESSAGE, encode_header(missing))
        assert not_found.code == ResponseCode.QUERY_NOT_FOUND
        (first,) = decode_records((await c.pull("Batch", 0, 0, max_nums=1)).body)
        view = ViewMessageRequestHeader(offset=first.commit_log_offset)
        viewed = await c.call(RequestCode.VIEW_MESSAGE_BY_ID, encode_header(view))
        assert viewed.code == ResponseCode.SUCCESS
        assert decode_record(viewed.body)[0].msg_id == ids[0]
        bad_view = await c.call(
            RequestCode.VIEW_MESSAGE_BY_ID, encode_header(ViewMessageRequestHeader(offset=3))
        )
        assert bad_view.code == ResponseCode.SYSTEM_ERROR


async def test_delay_level_message_is_delivered_later(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        sent = await c.send("Later", "wait", properties={"DELAY": "1"})
        assert sent.code == ResponseCode.SUCCESS
        started = time.monotonic()
        first = await c.pull("Later", 0, 0)
        assert first.code == ResponseCode.PULL_NOT_FOUND
        pulled = await c.pull("Later", 0, 0, suspend_ms=5_000)
        assert pulled.code == ResponseCode.SUCCESS
        assert time.monotonic() - started >= 0.9
        (message,) = decode_records(pulled.body)
        assert message.body == b"wait"
        assert message.properties["REAL_TOPIC"] == "Later"


async def test_offsets_and_timestamps(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        for body in ("a", "b", "c"):
            assert (await c.send("Offs", body)).code == ResponseCode.SUCCESS
        queue = {"topic": "Offs", "queueId": "0"}
        max_offset = await c.call(RequestCode.GET_MAX_OFFSET, queue)
        assert max_offset.ext_fields["offset"] == "3"
        min_offset = await c.call(RequestCode.GET_MIN_OFFSET, queue)
        assert min_offset.ext_fields["offset"] == "0"
        earliest = await c.call(RequestCode.GET_EARLIEST_MSG_STORETIME, queue)
        stamp = int(earliest.ext_fields["timestamp"])
        assert stamp > 0
        search = await c.call(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": str(stamp)}
        )
        assert search.ext_fields["offset"] == "0"
        future = await c.call(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": str(2**50)}
        )
        assert future.ext_fields["offset"] == "3"
        unknown = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "None", "queueId": "0"})
        assert unknown.ext_fields["offset"] == "0"


async def test_two_clients_interleave_sends(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        other = RemotingClient()
        try:
            results = await asyncio.gather(
                *(c.send("Many", f"m{i}", client=other if i % 2 else None) for i in range(40))
            )
        finally:
            await other.close()
        assert all(r.code == ResponseCode.SUCCESS for r in results)
        offsets = sorted(int(r.ext_fields["queueOffset"]) for r in results)
        assert offsets == list(range(40))


async def test_v1_send_header_is_accepted(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        header = SendMessageRequestHeader(
            producer_group="PG",
            topic="V1",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=2,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=7,
            properties="TAGS\x01T\x02",
        )
        sent = await c.call(RequestCode.SEND_MESSAGE, encode_header(header), b"v1")
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        (message,) = decode_records((await c.pull("V1", 2, 0)).body)
        assert (message.body, message.flag, message.tags) == (b"v1", 7, "T")
        assert message.born_host.startswith("127.0.0.1:")
