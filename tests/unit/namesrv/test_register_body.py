"""REGISTER_BROKER body parsing: Java's RegisterBrokerBody, the bare wrapper, refusals."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.namesrv.handlers import RegisterBrokerBody, encode_json, parse_register_body

TOPIC = {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}


def test_java_register_broker_body() -> None:
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {"T": TOPIC},
                "dataVersion": {"timestamp": 1700000000000, "counter": 3},
            },
            "filterServerList": [],
        }
    ).encode()
    assert parse_register_body(body) == RegisterBrokerBody(
        {"T": TOPIC}, {"timestamp": 1700000000000, "counter": 3}, ()
    )


def test_bare_wrapper_and_empty_body() -> None:
    bare = json.dumps({"topicConfigTable": {"T": TOPIC}, "dataVersion": None}).encode()
    assert parse_register_body(bare).topic_config_table == {"T": TOPIC}
    assert parse_register_body(b"") == RegisterBrokerBody()
    assert parse_register_body(b'{"topicConfigSerializeWrapper": {}}') == RegisterBrokerBody()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1]", "must be a JSON object"),
        (b'{"topicConfigSerializeWrapper": []}', "must be an object"),
        (b'{"topicConfigSerializeWrapper": {"topicConfigTable": [1]}}', "topicConfigTable"),
        (b'{"filterServerList": [1]}', "filterServerList"),
        (b"[" * 100_000, "not valid JSON"),
    ],
)
def test_malformed_bodies_raise_value_error(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_register_body(body)


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_value_error(body: bytes) -> None:
    with contextlib.suppress(ValueError):
        parse_register_body(body)


def test_encode_json_is_compact_standard_json() -> None:
    assert encode_json({"topicList": ["a", "b"]}) == b'{"topicList":["a","b"]}'
