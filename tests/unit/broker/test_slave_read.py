"""suggestWhichBrokerId: the pure policy (properties) and the pull processor
of a master and of a slave over an in-memory store."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.config import BrokerConfig
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.requests import MASTER_ID, PullRequest, SendRequest
from tidemq.broker.slave_read import (
    in_memory_limit,
    slave_pull_answer,
    suggest_pulling_from_slave,
    suggest_which_broker_id,
    total_physical_memory,
)
from tidemq.broker.topics import TopicConfig
from tidemq.common import sysflag
from tidemq.protocol.codes import ResponseCode
from tidemq.store.api import GetStatus, MessageToStore
from tidemq.testing.cores import NO_FEATURES, memory_core

ids = st.integers(min_value=0, max_value=16)
offsets = st.integers(min_value=0, max_value=2**50)
codes = st.sampled_from(
    [
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    ]
)


@given(slow=st.booleans(), group_id=ids, slowly_id=ids)
def test_without_slave_read_the_master_is_always_suggested(
    slow: bool, group_id: int, slowly_id: int
) -> None:
    assert (
        suggest_which_broker_id(
            slave_read_enable=False,
            pulling_from_slave=slow,
            group_broker_id=group_id,
            which_broker_when_consume_slowly=slowly_id,
        )
        == MASTER_ID
    )


@given(slow=st.booleans(), group_id=ids, slowly_id=ids)
def test_with_slave_read_a_slow_consumer_goes_where_its_group_says(
    slow: bool, group_id: int, slowly_id: int
) -> None:
    suggested = suggest_which_broker_id(
        slave_read_enable=True,
        pulling_from_slave=slow,
        group_broker_id=group_id,
        which_broker_when_consume_slowly=slowly_id,
    )
    assert suggested == (slowly_id if slow else group_id)


@given(end=offsets, pulled=offsets, limit=offsets)
def test_slow_means_more_unread_bytes_than_memory_holds(end: int, pulled: int, limit: int) -> None:
    assert suggest_pulling_from_slave(end, pulled, limit) is (end - pulled > limit)


@given(memory=st.integers(min_value=0, max_value=2**45), ratio=st.integers(0, 100))
def test_the_in_memory_limit_grows_with_the_ratio(memory: int, ratio: int) -> None:
    limit = in_memory_limit(memory, ratio)
    assert 0 <= limit <= memory
    assert limit <= in_memory_limit(memory, min(100, ratio + 1))
    assert in_memory_limit(memory, 100) == memory and in_memory_limit(memory, 0) == 0


def test_a_ratio_outside_a_percentage_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"access_message_in_memory_max_ratio=101: must be 0\.\.100"
    ):
        BrokerConfig(data_dir=tmp_path, access_message_in_memory_max_ratio=101)
    with pytest.raises(ValueError, match="access_message_in_memory_max_bytes=-1: must be >= 0"):
        BrokerConfig(data_dir=tmp_path, access_message_in_memory_max_bytes=-1)
    assert total_physical_memory() > 0


@given(
    status=st.sampled_from(list(GetStatus)),
    code=codes,
    request_offset=offsets,
    next_offset=offsets,
    suggestion=ids,
    group_id=ids,
)
def test_a_slave_never_moves_a_consumers_offset(
    status: GetStatus,
    code: int,
    request_offset: int,
    next_offset: int,
    suggestion: int,
    group_id: int,
) -> None:
    answer = slave_pull_answer(
        status=status,
        code=code,
        request_offset=request_offset,
        next_begin_offset=next_offset,
        suggestion=suggestion,
        group_broker_id=group_id,
    )
    assert answer.code != ResponseCode.PULL_OFFSET_MOVED
    if code == ResponseCode.PULL_OFFSET_MOVED:
        assert (answer.code, answer.suggest_which_broker_id) == (
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            group_id,
        )
    else:
        assert (answer.code, answer.suggest_which_broker_id) == (code, suggestion)
    moved_by_store = status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE)
    moved_by_store |= status is GetStatus.MESSAGE_WAS_REMOVING
    assert answer.next_begin_offset == (next_offset if moved_by_store else request_offset)


@given(
    status=st.sampled_from(list(GetStatus)), code=codes, request_offset=offsets, next_offset=offsets
)
def test_offset_check_in_slave_answers_as_a_master(
    status: GetStatus, code: int, request_offset: int, next_offset: int
) -> None:
    answer = slave_pull_answer(
        status=status,
        code=code,
        request_offset=request_offset,
        next_begin_offset=next_offset,
        suggestion=3,
        group_broker_id=0,
        offset_check_in_slave=True,
    )
    assert (answer.code, answer.next_begin_offset, answer.suggest_which_broker_id) == (
        code,
        next_offset,
        3,
    )


# -- the pull processor ---------------------------------------------------------------


def _pull(offset: int, count: int = 4) -> PullRequest:
    flag = sysflag.build_pull_sys_flag(subscription=True)
    return PullRequest("CG", "T", 0, offset, max_msg_nums=count, sys_flag=flag, subscription="*")


async def _master_with(tmp_path: Path, messages: int, **config: object) -> BrokerCore:
    broker = memory_core(tmp_path, NO_FEATURES, clock=None, store=None, **config)[0]
    for i in range(messages):
        request = SendRequest(producer_group="PG", topic="T", queue_id=0, body=b"m%d" % i)
        assert (await broker.send.send(request)).code == ResponseCode.SUCCESS
    return broker


async def _record_size(tmp_path: Path) -> int:
    """Bytes of one stored record of `_master_with` (every body is 2 bytes)."""
    probe = await _master_with(tmp_path / "probe", 1)
    return probe.service.store.commitlog_max_offset()


async def test_a_master_sends_a_far_behind_consumer_to_its_slave(tmp_path: Path) -> None:
    record = await _record_size(tmp_path)  # 3.5 records are "too far" here
    broker = await _master_with(
        tmp_path, 10, slave_read_enable=True, access_message_in_memory_max_bytes=record * 7 // 2
    )
    assert broker.service.store.commitlog_max_offset() == 10 * record
    behind = await broker.pull.pull(_pull(0))
    assert (behind.code, behind.suggest_which_broker_id) == (ResponseCode.SUCCESS, 1)
    last = await broker.pull.pull(_pull(6))  # reads up to the commitlog's end
    assert (last.code, last.suggest_which_broker_id) == (ResponseCode.SUCCESS, 0)


async def test_the_groups_ids_decide_where_a_consumer_goes(tmp_path: Path) -> None:
    broker = await _master_with(
        tmp_path,
        10,
        slave_read_enable=True,
        access_message_in_memory_max_bytes=await _record_size(tmp_path) * 7 // 2,
    )
    broker.admin.update_group(
        SubscriptionGroupConfig("CG", broker_id=2, which_broker_when_consume_slowly=3)
    )
    assert (await broker.pull.pull(_pull(0))).suggest_which_broker_id == 3
    assert (await broker.pull.pull(_pull(6))).suggest_which_broker_id == 2


async def test_by_default_every_pull_is_sent_to_the_master(tmp_path: Path) -> None:
    # slaveReadEnable is false by default, whatever the backlog (ratio 0: any).
    broker = await _master_with(tmp_path, 10, access_message_in_memory_max_ratio=0)
    assert (await broker.pull.pull(_pull(0))).suggest_which_broker_id == MASTER_ID


async def test_a_slave_serves_pulls_and_keeps_an_offset_it_cannot_serve(tmp_path: Path) -> None:
    broker, store, _ = memory_core(tmp_path, NO_FEATURES, broker_role="SLAVE", broker_id=1)
    broker.service.topics.update(TopicConfig("T", 1, 1))  # as copied from its master
    for i in range(3):
        await store.put_message(MessageToStore(topic="T", queue_id=0, body=b"m%d" % i))
    served = await broker.pull.pull(_pull(0))
    assert (served.code, served.message_count, served.suggest_which_broker_id) == (
        ResponseCode.SUCCESS,
        3,
        MASTER_ID,
    )
    # Offset 9 is past this slave's end (its master may have more): a master
    # would answer PULL_OFFSET_MOVED and move the consumer to 3.
    ahead = await broker.pull.pull(_pull(9))
    assert (ahead.code, ahead.next_begin_offset) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 9)
