"""ACL end to end with our client classes, a policy change without restart, and hostile
signature headers: a real name server and broker with a plain_acl.yml, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from acl_support import (
    ADMIN,
    APP,
    GROUP,
    OTHER,
    POLICY,
    TOPIC,
    AclCluster,
    acl_cluster,
    wrong_secret,
)

from tidemq import (
    AdminClient,
    AsyncLitePullConsumer,
    AsyncProducer,
    AsyncPushConsumer,
    AsyncSimpleConsumer,
    ClientError,
    ConsumeFromWhere,
    ConsumeStatus,
    Credentials,
    MessageExt,
    Producer,
    make_message,
)
from tidemq.client.admin import AdminError
from tidemq.protocol.codes import RequestCode, ResponseCode, SerializeType
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import SendMessageRequestHeaderV2, encode_header
from tidemq.testing.waiting import eventually


async def _topic(cluster: AclCluster) -> None:
    async with AdminClient(cluster.namesrv.address, credentials=ADMIN) as admin:
        await admin.create_topic(TOPIC, queues=2)


async def test_admin_client_with_and_without_credentials(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        async with AdminClient(cluster.namesrv.address) as anonymous:
            with pytest.raises(AdminError) as refused:
                await anonymous.create_topic(TOPIC, queues=2)
        assert refused.value.code == ResponseCode.NO_PERMISSION
        assert "No accessKey is configured" in str(refused.value)
        assert TOPIC not in cluster.broker.service.topics
        async with AdminClient(cluster.namesrv.address, credentials=APP) as app:
            with pytest.raises(AdminError, match="Need admin permission"):
                await app.create_topic(TOPIC, queues=2)
        await _topic(cluster)
        assert TOPIC in cluster.broker.service.topics


async def test_producers_sign_and_the_unsigned_one_is_refused(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await _topic(cluster)
        namesrv = cluster.namesrv.address
        anonymous = AsyncProducer("AclPG", namesrv, retry_times_when_send_failed=0)
        async with anonymous:
            with pytest.raises(ClientError) as refused:
                await anonymous.send(make_message(TOPIC, b"nope"))
        assert refused.value.code == ResponseCode.NO_PERMISSION
        other = AsyncProducer("AclPG", namesrv, credentials=OTHER, retry_times_when_send_failed=0)
        async with other:
            with pytest.raises(ClientError, match="No default permission for topic:AclTopic"):
                await other.send(make_message(TOPIC, b"nope"))
        store = cluster.broker.store
        assert store is not None
        assert sum(store.max_offset(TOPIC, q) for q in range(2)) == 0

        async with AsyncProducer("AclPG", namesrv, credentials=APP) as producer:
            result = await producer.send(make_message(TOPIC, b"async"))
        assert result.status == "SEND_OK"

        def blocking() -> str:
            with Producer("AclPG", namesrv, credentials=APP) as sync_producer:
                return str(sync_producer.send(make_message(TOPIC, b"sync")).status)

        assert await asyncio.to_thread(blocking) == "SEND_OK"
        assert sum(store.max_offset(TOPIC, q) for q in range(2)) == 2


async def test_blocking_sends_on_the_callers_thread_are_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Producer.send's own sockets (transport/blocking.py) sign as the loop's
    connections do: with the right keys every send after the route's is
    stored without going through the loop; with a wrong secret the broker
    refuses them and stores nothing."""
    loop_sends: list[str] = []
    real = AsyncProducer._send_with_retries

    def counting(self: AsyncProducer, *args: Any, **kwargs: Any) -> Any:
        loop_sends.append("loop")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AsyncProducer, "_send_with_retries", counting)
    async with acl_cluster(tmp_path) as cluster:
        await _topic(cluster)
        namesrv = cluster.namesrv.address
        store = cluster.broker.store
        assert store is not None

        def blocking() -> list[str]:
            with Producer("AclPG", namesrv, credentials=APP) as producer:
                statuses = [
                    str(producer.send(make_message(TOPIC, f"c{i}")).status) for i in range(4)
                ]
                assert producer._channels is not None
                assert producer._channels.open_count(cluster.address) == 1
            return statuses

        assert await asyncio.to_thread(blocking) == ["SEND_OK"] * 4
        assert loop_sends == ["loop"]  # the route's send; the other three on the caller's thread
        assert sum(store.max_offset(TOPIC, q) for q in range(2)) == 4

        def refused() -> ClientError:
            with (
                Producer(
                    "AclPG", namesrv, credentials=wrong_secret(APP), retry_times_when_send_failed=0
                ) as producer,
                pytest.raises(ClientError) as caught,
            ):
                producer.send(make_message(TOPIC, "nope"))
            return caught.value

        error = await asyncio.to_thread(refused)
        assert error.code == ResponseCode.NO_PERMISSION
        assert sum(store.max_offset(TOPIC, q) for q in range(2)) == 4


async def test_consumers_with_credentials_receive(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await _topic(cluster)
        namesrv = cluster.namesrv.address
        async with AsyncProducer("AclPG", namesrv, credentials=APP) as producer:
            for i in range(3):
                await producer.send(make_message(TOPIC, f"m{i}".encode()))
        wanted = {"m0", "m1", "m2"}

        pushed: set[str] = set()
        lock = threading.Lock()

        def listener(messages: list[MessageExt], context: object) -> ConsumeStatus:
            with lock:
                pushed.update(m.body.decode() for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        push = AsyncPushConsumer(
            GROUP,
            namesrv,
            listener=listener,
            credentials=APP,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        push.subscribe(TOPIC)
        async with push:
            await eventually(lambda: pushed >= wanted, "the push consumer's messages", timeout=20.0)

        lite = AsyncLitePullConsumer(
            "AclLite",
            namesrv,
            credentials=APP,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            instance_name="acl-lite",
        )
        lite.subscribe(TOPIC)
        polled: set[str] = set()
        async with lite:
            deadline = asyncio.get_running_loop().time() + 20.0
            while not polled >= wanted and asyncio.get_running_loop().time() < deadline:
                polled.update(m.body.decode() for m in await lite.poll(0.5))
        assert polled >= wanted

        async with AsyncSimpleConsumer(
            "AclPop", {TOPIC: "*"}, namesrv, credentials=APP, await_duration=1.0
        ) as simple:
            popped: set[str] = set()
            deadline = asyncio.get_running_loop().time() + 20.0
            while not popped >= wanted and asyncio.get_running_loop().time() < deadline:
                for message in await simple.receive(16):
                    popped.add(message.body.decode())
                    await simple.ack(message)
        assert popped >= wanted
        assert cluster.broker.acl is not None
        assert cluster.broker.acl.refusals()["no_access_key"] == 0


async def test_a_policy_change_is_taken_without_restart(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path, poll_interval_s=0.1) as cluster:
        await _topic(cluster)
        client = cluster.client_for(OTHER)
        refused = await cluster.send(TOPIC, "before", client=client)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert cluster.broker.acl_file is not None
        policy_file = cluster.broker.acl_file

        cluster.acl_path.write_text("accounts: [", encoding="utf-8")  # malformed: ignored
        _bump_mtime(cluster.acl_path)
        granted = POLICY.replace(
            f"secretKey: {OTHER.secret_key}\n    defaultTopicPerm: DENY",
            f"secretKey: {OTHER.secret_key}\n    defaultTopicPerm: PUB",
        )
        assert granted != POLICY
        still_app = await cluster.send(TOPIC, "still", client=cluster.client_for(APP))
        assert still_app.code == ResponseCode.SUCCESS  # the last good policy stays

        cluster.acl_path.write_text(granted, encoding="utf-8")
        _bump_mtime(cluster.acl_path)
        await eventually(lambda: policy_file.reloads >= 1, "the new policy")
        allowed = await cluster.send(TOPIC, "after", client=client)
        assert allowed.code == ResponseCode.SUCCESS, allowed.remark
        namesrv_access = cluster.namesrv.access
        assert namesrv_access is not None
        await eventually(lambda: namesrv_access.file.reloads >= 1, "the name server's new policy")


def _bump_mtime(path: Path) -> None:
    """A distinct mtime even on a coarse clock, so the poll sees the change."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


# -- hostile headers: a refusal, never a crash ----------------------------------------------


def _send_fields() -> dict[str, str]:
    header = SendMessageRequestHeaderV2(
        producer_group="AclPG",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=0,
        flag=0,
    )
    return encode_header(header)


FUZZ_CASES: dict[str, tuple[dict[str, str], bytes]] = {
    "signature not base64": (
        {**_send_fields(), "AccessKey": APP.access_key, "Signature": "%%%not-base64%%%"},
        b"x",
    ),
    "empty signature": ({**_send_fields(), "AccessKey": APP.access_key, "Signature": ""}, b"x"),
    "no signature": ({**_send_fields(), "AccessKey": APP.access_key}, b"x"),
    "huge access key": (
        {**_send_fields(), "AccessKey": "K" * 2_000_000, "Signature": "AAAA"},
        b"x",
    ),
    "huge signature": (
        {**_send_fields(), "AccessKey": APP.access_key, "Signature": "A" * 2_000_000},
        b"x",
    ),
    "many fields": (
        {**_send_fields(), **{f"f{i}": "v" for i in range(5000)}, "AccessKey": APP.access_key},
        b"x",
    ),
    "unicode key": ({**_send_fields(), "AccessKey": "\u202e\u0000ké", "Signature": "x"}, b"x"),
    "no fields at all": ({}, b""),
    "bad heartbeat body": ({"AccessKey": APP.access_key, "Signature": "x"}, b"\xff{"),
}


@pytest.mark.parametrize("case", list(FUZZ_CASES))
async def test_hostile_signature_headers_are_refused_and_the_broker_stays_up(
    tmp_path: Path, case: str
) -> None:
    fields, body = FUZZ_CASES[case]
    code = RequestCode.HEART_BEAT if "heartbeat" in case else RequestCode.SEND_MESSAGE_V2
    async with acl_cluster(tmp_path) as cluster:
        await _topic(cluster)
        raw = cluster.client_for(None)
        for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
            command = RemotingCommand.request(code, fields, body, serialize_type=serialize_type)
            response = await raw.invoke(cluster.address, command, 10.0)
            assert response.code == ResponseCode.NO_PERMISSION, (case, response.remark)
            assert response.remark and len(response.remark) < 400
            assert APP.secret_key not in response.remark
        store = cluster.broker.store
        assert store is not None
        assert sum(store.max_offset(TOPIC, q) for q in range(2)) == 0
        # the same connection still works, and so does the server
        ok = await cluster.send(TOPIC, "fine", client=cluster.client_for(APP))
        assert ok.code == ResponseCode.SUCCESS, ok.remark


async def test_a_wrong_secret_and_an_unknown_key_on_the_name_server(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as cluster:
        await _topic(cluster)
        command = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC})
        for credentials in (wrong_secret(ADMIN), Credentials("unknownKey", "unknownSecret")):
            client = cluster.client_for(credentials)
            response = await client.invoke(cluster.namesrv.address, command)
            assert response.code == ResponseCode.NO_PERMISSION, response.remark
        route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        anonymous = await cluster.client_for(None).invoke(cluster.namesrv.address, route)
        assert anonymous.code == ResponseCode.SUCCESS  # reads stay open, as in RocketMQ
        assert json.loads(anonymous.body)["brokerDatas"]
