"""The broker's processors over the in-memory store: the rules, without sockets."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.service import (
    BrokerError,
    PullRequest,
    RateCounter,
    SendRequest,
    pull_code,
)
from tidemq.broker.topics import TopicConfig
from tidemq.common import sysflag
from tidemq.common.properties import encode_properties
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.heartbeat import ConsumerData
from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus
from tidemq.testing.cores import NO_FEATURES, memory_core
from tidemq.testing.waiting import HANG_GUARD_S


def make_broker(tmp_path: Path, **overrides: object) -> BrokerCore:
    """The state and processors alone: no delay levels, timers, transactions or POP."""
    return memory_core(tmp_path, NO_FEATURES, **overrides)[0]


def send_request(topic: str, body: bytes = b"x", **fields: object) -> SendRequest:
    return SendRequest(producer_group="PG", topic=topic, queue_id=0, body=body, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (GetStatus.FOUND, 0, ResponseCode.SUCCESS),
        (GetStatus.NO_MATCHED_MESSAGE, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.MESSAGE_WAS_REMOVING, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 4, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 1, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_OVERFLOW_ONE, 5, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_FOUND_NULL, 5, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_OVERFLOW_BADLY, 9, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_TOO_SMALL, 0, ResponseCode.PULL_OFFSET_MOVED),
    ],
)
def test_pull_status_mapping(status: GetStatus, offset: int, code: int) -> None:
    assert pull_code(status, offset) == code


async def test_send_pull_and_commit(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    tags = encode_properties({"TAGS": "TagA"})
    result = await broker.send.send(send_request("T", b"hello", properties=tags))
    assert result.code == ResponseCode.SUCCESS and result.queue_offset == 0
    pull = PullRequest(
        "CG",
        "T",
        0,
        0,
        sys_flag=sysflag.build_pull_sys_flag(commit_offset=True, subscription=True),
        commit_offset=7,
        subscription="TagA",
    )
    pulled = await broker.pull.pull(pull)
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.msg_id for m in decode_records(pulled.body)] == [result.msg_id]
    assert broker.service.offsets.query("CG", "T", 0) == 7
    assert broker.service.stats.put_tps("T") > 0 and broker.service.stats.get_tps("T", "CG") > 0


async def test_send_refusals(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, auto_create_topic=False)
    cases = [
        (send_request("a b"), ResponseCode.MESSAGE_ILLEGAL),
        (send_request("SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION),
        (send_request("Unknown"), ResponseCode.TOPIC_NOT_EXIST),
    ]
    for request, code in cases:
        with pytest.raises(BrokerError) as caught:
            await broker.send.send(request)
        assert caught.value.code == code
    broker.admin.create_topic(TopicConfig("T", 2, 2))
    with pytest.raises(BrokerError) as caught:
        await broker.send.send(SendRequest("PG", "T", 5, b"x"))
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(BrokerError) as caught:
        await broker.send.send(send_request("T", b"x" * (4 * 1024 * 1024 + 1)))
    assert caught.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "4194305 bytes" in caught.value.remark
    transactional = encode_properties({"TRAN_MSG": "true"})
    with pytest.raises(BrokerError) as caught:
        await broker.send.send(send_request("T", properties=transactional))
    assert caught.value.code == ResponseCode.NO_PERMISSION
    # Retry topics are created on send even without auto-creation (Java does).
    retried = await broker.send.send(send_request("%RETRY%CG", reconsume_times=1))
    assert retried.code == ResponseCode.SUCCESS
    dead = await broker.send.send(send_request("%RETRY%CG", reconsume_times=16))
    assert broker.service.store.max_offset("%DLQ%CG", 0) == 1
    assert dead.queue_id == 0


async def test_query_consumer_offset_follows_javas_rule(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    assert broker.pull.query_consumer_offset("CG", "T", 0) == 0
    with pytest.raises(BrokerError) as caught:
        broker.pull.query_consumer_offset("CG", "T", 0, set_zero_if_not_found=False)
    assert caught.value.code == ResponseCode.QUERY_NOT_FOUND
    broker.pull.update_consumer_offset("CG", "T", 0, 4)
    broker.pull.update_consumer_offset("CG", "T", 0, -1)
    assert broker.pull.query_consumer_offset("CG", "T", 0) == 4


async def test_without_long_polling_an_empty_pull_is_held_the_short_polling_time(
    tmp_path: Path,
) -> None:
    broker = make_broker(tmp_path, long_polling_enable=False, short_polling_time_ms=50)
    await broker.send.send(send_request("T"))
    pull = PullRequest(
        "CG",
        "T",
        0,
        1,  # past the only message: nothing new
        sys_flag=sysflag.build_pull_sys_flag(suspend=True, subscription=True),
        suspend_timeout_ms=3_600_000,  # held for the client's hour, the hang guard fails
        subscription="*",
    )
    started = time.monotonic()
    pulled = await asyncio.wait_for(broker.pull.pull(pull), HANG_GUARD_S)
    assert pulled.code == ResponseCode.PULL_NOT_FOUND
    assert time.monotonic() - started >= 0.04  # held, not answered at once


async def test_pull_refusals(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, auto_create_subscription_group=False)
    with pytest.raises(BrokerError) as caught:
        await broker.pull.pull(PullRequest("Nobody", "T", 0, 0))
    assert caught.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    broker.service.groups.update(SubscriptionGroupConfig("CG"))
    with pytest.raises(BrokerError) as caught:
        await broker.pull.pull(PullRequest("CG", "Missing", 0, 0))
    assert caught.value.code == ResponseCode.TOPIC_NOT_EXIST
    await broker.send.send(send_request("T"))
    sql = PullRequest(
        "CG",
        "T",
        0,
        0,
        sys_flag=sysflag.PULL_SUBSCRIPTION,
        subscription="a > 1",
        expression_type="SQL92",
    )
    with pytest.raises(BrokerError, match="SQL92") as caught:
        await broker.pull.pull(sql)
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(BrokerError) as caught:
        await broker.pull.pull(PullRequest("CG", "T", 0, 0))  # no subscription, no heartbeat
    assert caught.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_reset_offset_and_stats_bodies(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    for _ in range(3):
        await broker.send.send(send_request("T"))
    broker.pull.update_consumer_offset("CG", "T", 0, 3)
    assert broker.admin.reset_offset("CG", "T", 0) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert broker.admin.reset_offset("CG", "T", -1) == {0: 3, 1: 0, 2: 0, 3: 0}
    assert broker.admin.reset_offset("CG", "T", -1, queue_id=0, offset=1) == {0: 1}
    stats = broker.admin.topic_stats("T")
    key = '{"brokerName":"broker-a","queueId":0,"topic":"T"}'
    assert stats["offsetTable"][key]["maxOffset"] == 3
    consume = broker.admin.consume_stats("CG")
    assert consume["offsetTable"][key] == {
        "brokerOffset": 3,
        "consumerOffset": 1,
        "pullOffset": 1,
        "lastTimestamp": consume["offsetTable"][key]["lastTimestamp"],
    }
    info = broker.admin.runtime_info()
    assert info["msgPutTotalTodayNow"] == "3"
    assert all(isinstance(v, str) for v in info.values())


def test_rate_counter_window() -> None:
    counter = RateCounter(window_s=60)
    counter.add(30, 1000.0)
    counter.add(30, 1030.5)
    assert counter.in_window(1031.0) == 60
    assert counter.tps(1031.0) == 1.0
    assert counter.in_window(1061.0) == 30
    assert counter.in_window(2000.0) == 0
    assert counter.total == 60


async def test_a_timestamp_consumer_gets_query_not_found_to_search_by_time(
    tmp_path: Path,
) -> None:
    broker = make_broker(tmp_path)
    connection = _Connection()
    broker.service.consumers.register(
        ConsumerData("CGT", consume_from_where="CONSUME_FROM_TIMESTAMP"), "c1", connection
    )
    with pytest.raises(BrokerError) as caught:
        broker.pull.query_consumer_offset("CGT", "T", 0)
    assert caught.value.code == ResponseCode.QUERY_NOT_FOUND
    broker.pull.update_consumer_offset("CGT", "T", 0, 2)
    assert broker.pull.query_consumer_offset("CGT", "T", 0) == 2


class _Connection:
    id = 1
    remote = ("127.0.0.1", 1)
    closed = False

    def send(self, command: object) -> None:
        pass

    def send_oneway(self, command: object) -> None:
        pass

    def close(self) -> None:
        pass
