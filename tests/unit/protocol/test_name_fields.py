"""The name gate in front of every remoting handler: which extFields name
topics and groups, and the INVALID_PARAMETER answer."""

from __future__ import annotations

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.name_fields import name_problem, named_fields, refuse_bad_names


def test_v1_keys_and_v2_letters() -> None:
    fields = {"topic": "T", "consumerGroup": "G", "b": "ignored"}
    assert sorted(named_fields(RequestCode.PULL_MESSAGE, fields)) == [
        ("consumerGroup", "group", "G"),
        ("topic", "topic", "T"),
    ]
    v2 = {"a": "PG", "b": "T", "c": "TBW102", "topic": "not a header key in V2"}
    assert sorted(named_fields(RequestCode.SEND_MESSAGE_V2, v2)) == [
        ("a", "group", "PG"),
        ("b", "topic", "T"),
        ("c", "topic", "TBW102"),
    ]


def test_refusals_name_the_problem() -> None:
    assert name_problem(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Fine"}) is None
    assert name_problem(RequestCode.DELETE_TOPIC_IN_BROKER, {}) is None
    empty = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": ""})
    answer = refuse_bad_names(empty)
    assert answer is not None and answer.code == ResponseCode.INVALID_PARAMETER
    assert answer.remark == "The specified topic is blank."
    origin = name_problem(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "originTopic": ".."})
    assert origin is not None and origin.startswith("originTopic: ")
    assert refuse_bad_names(RemotingCommand.request(RequestCode.HEART_BEAT, {})) is None


def test_remembered_names_stay_bounded_and_never_let_a_bad_name_through() -> None:
    from tidemq.protocol import name_fields

    code = int(RequestCode.SEND_MESSAGE_V2)
    for i in range(name_fields._ACCEPTED_LIMIT + 10):
        assert name_problem(code, {"a": "Producers", "b": f"Topic{i}"}) is None
    limit = name_fields._ACCEPTED_LIMIT
    assert all(len(names) <= limit for names in name_fields._ACCEPTED.values())
    assert name_problem(code, {"a": "Producers", "b": "Topic1"}) is None
    assert name_problem(code, {"a": "Producers", "b": "../etc"}) is not None
    assert name_problem(code, {"a": "Producers", "b": ""}) is not None
    assert name_problem(code, {"a": "bad/group", "b": "Topic1"}) is not None
