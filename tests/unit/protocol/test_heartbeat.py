"""The HEART_BEAT body: what a client builds is what the broker parses back."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.heartbeat import (
    BROADCASTING,
    CLUSTERING,
    ConsumerData,
    HeartbeatData,
    Subscription,
    parse_heartbeat,
)

names = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%",
    min_size=1,
    max_size=20,
)

subscriptions = st.builds(
    Subscription,
    topic=names,
    sub_string=st.sampled_from(["*", "TagA", "TagA || TagB"]),
    tags_set=st.lists(names, max_size=3).map(tuple),
    code_set=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3).map(tuple),
    sub_version=st.integers(0, 2**62),
)
consumers = st.builds(
    ConsumerData,
    group_name=names,
    message_model=st.sampled_from([CLUSTERING, BROADCASTING]),
    subscriptions=st.lists(subscriptions, max_size=3).map(tuple),
)


@given(
    client_id=names,
    consumers=st.lists(consumers, max_size=3).map(tuple),
    producers=st.lists(names, max_size=3).map(tuple),
)
def test_encode_then_parse_is_identity(
    client_id: str, consumers: tuple[ConsumerData, ...], producers: tuple[str, ...]
) -> None:
    data = HeartbeatData(client_id, consumers, producers)
    assert parse_heartbeat(data.encode()) == data


def test_json_uses_the_java_field_names() -> None:
    data = HeartbeatData(
        "127.0.0.1@1",
        (ConsumerData("CG", subscriptions=(Subscription("T", "TagA", ("TagA",), (80,)),)),),
        ("PG",),
    )
    document = json.loads(data.encode())
    assert document["clientID"] == "127.0.0.1@1"
    assert document["producerDataSet"] == [{"groupName": "PG"}]
    consumer = document["consumerDataSet"][0]
    assert consumer["groupName"] == "CG"
    assert consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert consumer["messageModel"] == "CLUSTERING"
    assert consumer["subscriptionDataSet"][0]["tagsSet"] == ["TagA"]
    assert consumer["subscriptionDataSet"][0]["codeSet"] == [80]
