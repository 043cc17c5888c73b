"""Broker over real sockets: clients, groups, offsets, retries, locks and admin bodies."""

from __future__ import annotations

import json
import time
from pathlib import Path

from broker_harness import Cluster, Pushes, running_cluster

from tidemq.common.message import MessageExt
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.record.codec import decode_records
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient


async def _consumer_ids(c: Cluster, group: str) -> list[str]:
    response = await c.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if response.code != ResponseCode.SUCCESS:
        return []
    ids: list[str] = json.loads(response.body)["consumerIdList"]
    return ids


async def test_heartbeat_registers_the_consumer_and_its_retry_topic(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        none = await c.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG1"})
        assert none.code == ResponseCode.SYSTEM_ERROR
        assert "no consumer for this group, CG1" in (none.remark or "")
        beat = await c.heartbeat("10.0.0.1@1", "CG1", topics={"T": "*"}, producer_group="PG1")
        assert beat.code == ResponseCode.SUCCESS
        assert await _consumer_ids(c, "CG1") == ["10.0.0.1@1"]
        route = await eventually(lambda: c.route("%RETRY%CG1"), "the retry topic route")
        (queue_data,) = route["queueDatas"]
        assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (1, 1)
        assert queue_data["perm"] == 6
        connection = await c.call(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG1"}
        )
        document = json.loads(connection.body)
        assert [x["clientId"] for x in document["connectionSet"]] == ["10.0.0.1@1"]
        assert document["messageModel"] == "CLUSTERING"
        assert set(document["subscriptionTable"]) == {"T"}
        producers = await c.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"})
        assert producers.code == ResponseCode.SUCCESS
        gone = await c.call(
            RequestCode.UNREGISTER_CLIENT, {"clientID": "10.0.0.1@1", "consumerGroup": "CG1"}
        )
        assert gone.code == ResponseCode.SUCCESS
        assert await _consumer_ids(c, "CG1") == []


async def test_members_are_notified_when_a_second_consumer_joins(tmp_path: Path) -> None:
    pushes = Pushes()
    async with running_cluster(tmp_path, request_handler=pushes) as c:
        assert (await c.heartbeat("h@first", "CGN", topics={"T": "*"})).code == 0
        second = RemotingClient()
        try:
            assert (
                await c.heartbeat("h@second", "CGN", topics={"T": "*"}, client=second)
            ).code == 0

            async def notified() -> bool:
                return any(
                    p.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
                    and p.ext_fields.get("consumerGroup") == "CGN"
                    and p.is_oneway
                    for p in pushes.received
                )

            await eventually(notified, "NOTIFY_CONSUMER_IDS_CHANGED")
            assert sorted(await _consumer_ids(c, "CGN")) == ["h@first", "h@second"]
        finally:
            await second.close()
        # The second client's connection closed: it leaves the group.
        await eventually(
            lambda: _only(c, "CGN", ["h@first"]), "the closed consumer to leave the group"
        )


async def _only(c: Cluster, group: str, ids: list[str]) -> bool:
    return await _consumer_ids(c, group) == ids


async def test_consumer_offsets_rules_and_restart(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        for body in ("a", "b", "c"):
            assert (await c.send("Off", body)).code == ResponseCode.SUCCESS
        query = {"consumerGroup": "CGO", "topic": "Off", "queueId": "0"}
        fresh = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)
        assert (fresh.code, fresh.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
        strict = await c.call(
            RequestCode.QUERY_CONSUMER_OFFSET, {**query, "setZeroIfNotFound": "false"}
        )
        assert strict.code == ResponseCode.QUERY_NOT_FOUND
        update = {**query, "commitOffset": "2"}
        assert (await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
        ignored = {**query, "commitOffset": "-1"}
        assert (await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, ignored)).code == 0
        assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)).ext_fields["offset"] == "2"
        # A pull carrying a commit offset commits it.
        pulled = await c.pull("Off", 1, 0, group="CGO", commit_offset=0)
        assert pulled.code == ResponseCode.PULL_NOT_FOUND
        await c.pull("Off", 0, 2, group="CGO", commit_offset=3)
        assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)).ext_fields["offset"] == "3"
        await c.restart_broker()
        after = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)
        assert (after.code, after.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "3")
        stored = json.loads((c.data_dir / "config" / "consumerOffset.json").read_text())
        assert stored["offsetTable"]["Off@CGO"] == {"0": 3}
        pulled = await c.pull("Off", 0, 0)
        assert [m.body for m in decode_records(pulled.body)] == [b"a", b"b", b"c"]


async def _retry_messages(c: Cluster, topic: str, count: int) -> list[MessageExt] | None:
    pulled = await c.pull(topic, 0, 0)
    if pulled.code != ResponseCode.SUCCESS:
        return None
    messages = decode_records(pulled.body)
    return messages if len(messages) >= count else None


async def test_send_back_goes_to_retry_with_delay_then_to_dlq(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        sent = await c.send("Orders", "pay", tags="TagA")
        assert sent.code == ResponseCode.SUCCESS
        (original,) = decode_records((await c.pull("Orders", 0, 0)).body)
        back = {
            "offset": str(original.commit_log_offset),
            "group": "CGR",
            "delayLevel": "0",
            "originMsgId": original.msg_id,
            "originTopic": "Orders",
            "unitMode": "false",
            "maxReconsumeTimes": "1",
        }
        started = time.monotonic()
        assert (await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, back)).code == 0
        retried = await eventually(
            lambda: _retry_messages(c, "%RETRY%CGR", 1), "the retry message", timeout=15
        )
        assert time.monotonic() - started >= 0.9
        (first_retry,) = retried
        assert first_retry.topic == "%RETRY%CGR"
        assert first_retry.reconsume_times == 1
        assert first_retry.body == b"pay"
        assert first_retry.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
        assert first_retry.properties["RETRY_TOPIC"] == "Orders"
        assert first_retry.tags == "TagA"
        # reconsumeTimes 1 >= maxReconsumeTimes 1: dead letter.
        again = {**back, "offset": str(first_retry.commit_log_offset)}
        assert (await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, again)).code == 0
        dead = await eventually(lambda: _retry_messages(c, "%DLQ%CGR", 1), "the DLQ message")
        assert dead[0].properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
        assert dead[0].reconsume_times == 2
        missing = {**back, "offset": "123456789"}
        failed = await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, missing)
        assert failed.code == ResponseCode.SYSTEM_ERROR
        assert "look message by offset failed" in (failed.remark or "")


async def test_retry_topic_send_past_max_reconsume_goes_to_dlq(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        assert (await c.heartbeat("h@1", "CGF", topics={"T": "*"})).code == 0
        fallback = await c.send("%RETRY%CGF", "again", reconsume_times=1, max_reconsume_times=3)
        assert fallback.code == ResponseCode.SUCCESS
        assert await _retry_messages(c, "%RETRY%CGF", 1)
        dead = await c.send("%RETRY%CGF", "dead", reconsume_times=3, max_reconsume_times=3)
        assert dead.code == ResponseCode.SUCCESS
        (message,) = await eventually(lambda: _retry_messages(c, "%DLQ%CGF", 1), "the DLQ")
        assert message.body == b"dead"


async def test_lock_and_unlock_batch(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        queues = [{"topic": "T", "brokerName": "broker-a", "queueId": q} for q in (0, 1)]

        async def lock(client_id: str) -> list[int]:
            body = {"consumerGroup": "CGL", "clientId": client_id, "mqSet": queues}
            response = await c.call(RequestCode.LOCK_BATCH_MQ, {}, json.dumps(body).encode())
            assert response.code == ResponseCode.SUCCESS
            return sorted(q["queueId"] for q in json.loads(response.body)["lockOKMQSet"])

        assert await lock("a") == [0, 1]
        assert await lock("b") == []
        body = {"consumerGroup": "CGL", "clientId": "a", "mqSet": queues[:1]}
        unlocked = await c.call(RequestCode.UNLOCK_BATCH_MQ, {}, json.dumps(body).encode())
        assert unlocked.code == ResponseCode.SUCCESS
        assert await lock("b") == [0]
        bad = await c.call(RequestCode.LOCK_BATCH_MQ, {}, b"not json")
        assert bad.code == ResponseCode.SYSTEM_ERROR


async def test_admin_topics_groups_and_stats(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as c:
        create = {
            "topic": "Admin",
            "defaultTopic": "TBW102",
            "readQueueNums": "2",
            "writeQueueNums": "2",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
        }
        assert (await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == 0
        await eventually(lambda: c.route("Admin"), "the created topic's route")
        bad = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "a b"})
        assert bad.code == ResponseCode.INVALID_PARAMETER  # Java: TopicValidator's answer
        assert bad.remark is not None and "illegal characters" in bad.remark
        system = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "TBW102"})
        assert system.code == ResponseCode.SYSTEM_ERROR
        topics = json.loads((await c.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
        assert topics["topicConfigTable"]["Admin"]["readQueueNums"] == 2
        assert topics["topicConfigTable"]["TBW102"]["perm"] == 7
        assert topics["topicConfigTable"]["SCHEDULE_TOPIC_XXXX"]["readQueueNums"] == 6
        for body in ("x", "y"):
            assert (await c.send("Admin", body, queue_id=1)).code == 0
        stats = json.loads(
            (await c.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})).body
        )
        table = {json.loads(k)["queueId"]: v for k, v in stats["offsetTable"].items()}
        assert table[1]["maxOffset"] == 2 and table[0]["maxOffset"] == 0
        assert table[1]["lastUpdateTimestamp"] > 0
        group = {"groupName": "CGA", "retryMaxTimes": 3, "consumeBroadcastEnable": False}
        made = await c.call(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(group).encode()
        )
        assert made.code == 0
        groups = json.loads((await c.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
        assert groups["subscriptionGroupTable"]["CGA"]["retryMaxTimes"] == 3
        update = {"consumerGroup": "CGA", "topic": "Admin", "queueId": "1", "commitOffset": "1"}
        assert (await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
        await c.pull("Admin", 1, 0, group="CGA")
        consume = json.loads(
            (await c.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CGA"})).body
        )
        rows = {json.loads(k)["queueId"]: v for k, v in consume["offsetTable"].items()}
        assert (rows[1]["brokerOffset"], rows[1]["consumerOffset"]) == (2, 1)
        assert consume["consumeTps"] > 0
        reset = await c.call(
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": "Admin", "group": "CGA", "timestamp": "0", "isForce": "true"},
        )
        assert reset.code == 0
        offsets = {
            json.loads(k)["queueId"]: v for k, v in json.loads(reset.body)["offsetTable"].items()
        }
        assert offsets == {0: 0, 1: 0}
        query = {"consumerGroup": "CGA", "topic": "Admin", "queueId": "1"}
        assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)).ext_fields["offset"] == "0"
        who = json.loads(
            (await c.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Admin"})).body
        )
        assert who == {"groupList": ["CGA"]}
        all_offsets = json.loads((await c.call(RequestCode.GET_ALL_CONSUMER_OFFSET)).body)
        assert all_offsets["offsetTable"]["Admin@CGA"] == {"0": 0, "1": 0}
        one_topic = json.loads(
            (await c.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "Admin"})).body
        )
        assert one_topic["topicConfig"]["writeQueueNums"] == 2
        one_group = await c.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "CGA"})
        assert json.loads(one_group.body)["consumeBroadcastEnable"] is False
        runtime = json.loads((await c.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body)
        assert runtime["table"]["msgPutTotalTodayNow"] == "2"
        assert runtime["table"]["brokerAddr"] == c.address
        deleted = await c.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CGA"})
        assert deleted.code == 0
        assert (await c.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})).code == 0
        gone = await c.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})
        assert gone.code == ResponseCode.TOPIC_NOT_EXIST
        system_delete = await c.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
        assert system_delete.code == ResponseCode.SYSTEM_ERROR


async def test_offsets_are_persisted_periodically(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, persist_interval_s=0.1) as c:
        update = {"consumerGroup": "CGP", "topic": "P", "queueId": "2", "commitOffset": "9"}
        assert (await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
        path = c.data_dir / "config" / "consumerOffset.json"

        async def persisted() -> bool:
            if not path.exists():
                return False
            return json.loads(path.read_text())["offsetTable"].get("P@CGP") == {"2": 9}

        await eventually(persisted, "the offset file")
