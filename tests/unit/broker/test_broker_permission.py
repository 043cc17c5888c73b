"""brokerPermission over the in-memory broker: reads refused without the read bit,
sends to ordered topics without the write bit, UPDATE_BROKER_CONFIG changing it,
and the pure parts (parsing, masking)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.permission import BrokerPermission, parse_permission
from tidemq.broker.service import BrokerError, PullRequest, SendRequest
from tidemq.broker.topics import TopicConfig
from tidemq.common import sysflag
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.java_properties import parse_java_properties
from tidemq.testing.cores import NO_FEATURES, memory_core


class Peer:
    """The connection a handler is given: only its address is read."""

    remote = ("10.0.0.9", 40000)


def broker(tmp_path: Path) -> BrokerCore:
    core = memory_core(tmp_path, NO_FEATURES)[0]
    core.admin.create_topic(TopicConfig("Plain", 1, 1))
    core.admin.create_topic(TopicConfig("Ordered", 1, 1, order=True))
    return core


def send(topic: str) -> SendRequest:
    return SendRequest(producer_group="PG", topic=topic, queue_id=0, body=b"x")


def pull(topic: str) -> PullRequest:
    flag = sysflag.build_pull_sys_flag(subscription=True)
    return PullRequest("CG", topic, 0, 0, sys_flag=flag, subscription="*")


async def update(core: BrokerCore, body: str) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, body.encode())
    handler = core.dispatch_table()[RequestCode.UPDATE_BROKER_CONFIG]
    try:
        answer = await handler(request, Peer())  # type: ignore[arg-type]
    except BrokerError as exc:
        return RemotingCommand.response_to(request, exc.code, exc.remark)
    assert answer is not None
    return answer


async def config_of(core: BrokerCore) -> dict[str, str]:
    request = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
    answer = await core.dispatch_table()[RequestCode.GET_BROKER_CONFIG](request, Peer())  # type: ignore[arg-type]
    assert answer is not None
    return parse_java_properties(answer.body.decode())


async def test_read_only_refuses_ordered_sends_but_stores_others(tmp_path: Path) -> None:
    core = broker(tmp_path)
    assert (await update(core, "brokerPermission=4\n")).code == ResponseCode.SUCCESS
    assert (await config_of(core))["brokerPermission"] == "4"
    assert (await core.send.send(send("Plain"))).code == ResponseCode.SUCCESS  # as Java
    with pytest.raises(BrokerError) as refused:
        await core.send.send(send("Ordered"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    host = core.service.config.advertised_host
    assert refused.value.remark == f"the broker[{host}] sending message is forbidden"
    assert (await core.pull.pull(pull("Plain"))).code == ResponseCode.SUCCESS


async def test_without_the_read_bit_pulls_are_refused(tmp_path: Path) -> None:
    core = broker(tmp_path)
    await core.send.send(send("Plain"))
    assert (await update(core, "# from mqadmin\nbrokerPermission = 2\n")).code == 0
    with pytest.raises(BrokerError) as refused:
        await core.pull.pull(pull("Plain"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "pulling message is forbidden" in refused.value.remark
    assert (await update(core, "brokerPermission=6")).code == ResponseCode.SUCCESS
    assert (await core.pull.pull(pull("Plain"))).code == ResponseCode.SUCCESS


async def test_only_broker_permission_changes_while_running(tmp_path: Path) -> None:
    core = broker(tmp_path)
    for body, words in (
        ("flushDiskType=SYNC_FLUSH", "cannot change flushDiskType while the broker runs"),
        ("brokerPermission=4\nlistenPort=1", "cannot change listenPort"),
        ("brokerPermission=9", "brokerPermission must be 0..7"),
        ("brokerPermission=rw", "brokerPermission must be a number"),
        ("", "no setting given"),
    ):
        answer = await update(core, body)
        assert answer.code == ResponseCode.INVALID_PARAMETER, body
        assert words in (answer.remark or ""), (body, answer.remark)
    assert core.service.permission.value == 6  # nothing half-applied


@given(broker_perm=st.integers(0, 7), topic_perm=st.integers(0, 7))
def test_masking(broker_perm: int, topic_perm: int) -> None:
    permission = BrokerPermission(broker_perm, "10.0.0.1")
    masked = permission.mask(topic_perm)
    if broker_perm & 6 == 6:
        assert masked == topic_perm
    else:
        assert masked == topic_perm & broker_perm
    assert parse_permission(str(broker_perm)) == broker_perm


def test_a_change_is_announced_once() -> None:
    changes: list[int] = []
    permission = BrokerPermission(6, "10.0.0.1", lambda: changes.append(1))
    permission.set(4)
    permission.set(4)
    permission.set(6)
    assert changes == [1, 1]
