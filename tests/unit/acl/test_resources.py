"""The resources and permissions each request code needs (PlainAccessResource.parse)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl.permissions import Permission
from tidemq.acl.resources import group_of_retry_topic, is_retry_topic, needed_permissions
from tidemq.protocol.codes import RequestCode as R
from tidemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription, parse_heartbeat

PUB, SUB = Permission.PUB, Permission.SUB


@pytest.mark.parametrize(
    ("code", "fields", "expected"),
    [
        (R.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}, [("T", PUB)]),
        (R.SEND_MESSAGE, {"topic": "%RETRY%G", "producerGroup": "P"}, [("%RETRY%G", SUB)]),
        (R.SEND_MESSAGE_V2, {"a": "P", "b": "T", "topic": "ignored"}, [("T", PUB)]),
        (R.SEND_MESSAGE_V2, {"a": "P", "b": "%RETRY%G"}, [("%RETRY%G", SUB)]),
        (R.SEND_BATCH_MESSAGE, {"a": "P", "b": "T"}, [("T", PUB)]),
        (R.SEND_MESSAGE_V2, {"a": "P"}, []),
        (R.RECALL_MESSAGE, {"topic": "T"}, [("T", PUB)]),
        (R.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": "1"}, [("%RETRY%G", SUB)]),
        (R.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, [("T", SUB), ("%RETRY%G", SUB)]),
        (R.PULL_MESSAGE, {"topic": "%RETRY%G", "consumerGroup": "G"}, [("%RETRY%G", SUB)]),
        (R.QUERY_MESSAGE, {"topic": "T", "key": "k"}, [("T", SUB)]),
        (R.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "G"}, [("%RETRY%G", SUB)]),
        (R.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}, []),
        (R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, [("%RETRY%G", SUB)]),
        (
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "-1"},
            [("%RETRY%G", SUB), ("T", SUB)],
        ),
        (R.END_TRANSACTION, {"producerGroup": "P", "tranStateTableOffset": "1"}, []),
        (R.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, []),
        (R.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, []),
    ],
)
def test_table(code: int, fields: dict[str, str], expected: list[tuple[str, Permission]]) -> None:
    assert needed_permissions(code, fields) == expected


def test_no_ext_fields_needs_nothing() -> None:
    assert needed_permissions(R.SEND_MESSAGE, None) == []


def test_heartbeat_uses_decoded_consumers() -> None:
    heartbeat = HeartbeatData(
        "client",
        consumers=(
            ConsumerData("G1", subscriptions=(Subscription("T1"), Subscription("%RETRY%G1"))),
            ConsumerData("G2", subscriptions=(Subscription("T2"),)),
        ),
        producer_groups=("P",),
    )
    decoded = parse_heartbeat(heartbeat.encode())
    assert needed_permissions(R.HEART_BEAT, {}, decoded) == [
        ("%RETRY%G1", SUB),
        ("T1", SUB),
        ("%RETRY%G2", SUB),
        ("T2", SUB),
    ]
    assert needed_permissions(R.HEART_BEAT, {}, HeartbeatData("c", producer_groups=("P",))) == []


def test_heartbeat_without_body_is_refused() -> None:
    with pytest.raises(ValueError, match="HEART_BEAT"):
        needed_permissions(R.HEART_BEAT, {})


@pytest.mark.parametrize(
    ("code", "fields", "missing"),
    [
        (R.UNREGISTER_CLIENT, {"consumerGroup": "G"}, "clientID"),
        (R.GET_CONSUMER_LIST_BY_GROUP, {}, "consumerGroup"),
        (
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "queueId": "0", "commitOffset": "1"},
            "topic",
        ),
        (
            R.UPDATE_CONSUMER_OFFSET,
            {"topic": "T", "queueId": "0", "commitOffset": "1"},
            "consumerGroup",
        ),
        (
            R.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "commitOffset": "1"},
            "queueId",
        ),
    ],
)
def test_missing_required_header_field(code: int, fields: dict[str, str], missing: str) -> None:
    with pytest.raises(ValueError, match=f"<{missing}> is null"):
        needed_permissions(code, fields)


@pytest.mark.parametrize(
    ("queue_id", "offset"),
    [("x", "1"), (" 1", "1"), ("2147483648", "1"), ("0", "9223372036854775808"), ("1_0", "1")],
)
def test_bad_numbers_in_offset_header(queue_id: str, offset: str) -> None:
    fields = {"consumerGroup": "G", "topic": "T", "queueId": queue_id, "commitOffset": offset}
    with pytest.raises(ValueError, match="is not a number"):
        needed_permissions(R.UPDATE_CONSUMER_OFFSET, fields)


def test_retry_helpers() -> None:
    assert is_retry_topic("%RETRY%G") and not is_retry_topic("T") and not is_retry_topic(None)
    assert group_of_retry_topic("%RETRY%G") == "G"


names = st.text(min_size=1, max_size=10).filter(lambda n: not n.startswith("%RETRY%"))


@given(names, names)
def test_pull_needs_sub_on_topic_and_group(topic: str, group: str) -> None:
    pairs = dict(needed_permissions(R.PULL_MESSAGE, {"topic": topic, "consumerGroup": group}))
    assert pairs["%RETRY%" + group] == SUB
    assert pairs[topic] == SUB
    assert all(perm == SUB for perm in pairs.values())


@given(names, st.sampled_from([R.SEND_MESSAGE, R.SEND_MESSAGE_V2, R.SEND_BATCH_MESSAGE]))
def test_every_send_needs_pub_on_a_plain_topic_only(topic: str, code: int) -> None:
    key = "topic" if code == R.SEND_MESSAGE else "b"
    assert needed_permissions(code, {key: topic, "a": "P", "producerGroup": "P"}) == [(topic, PUB)]
