"""Property-string encoding, the key constants, and the Message accessors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.processors.send import waits_for_store
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt, MessageQueue
from tidemq.common.properties import (
    decode_properties,
    decode_properties_bytes,
    encode_properties,
    encode_properties_bytes,
)


def test_encode_puts_a_separator_after_every_pair() -> None:
    assert encode_properties({"TAGS": "TagA"}) == "TAGS\x01TagA\x02"
    assert encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"}) == (
        "TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
    )
    assert encode_properties({}) == ""


def test_decode_a_java_property_string() -> None:
    assert decode_properties("TAGS\x01TagA\x02KEYS\x01k1 k2\x02") == {
        "TAGS": "TagA",
        "KEYS": "k1 k2",
    }


def test_decode_tolerates_missing_final_separator() -> None:
    assert decode_properties("TAGS\x01TagA\x02KEYS\x01k1") == {"TAGS": "TagA", "KEYS": "k1"}


def test_decode_skips_the_empty_pair_ali_ons_resends() -> None:
    raw = "TAGS\x01TagA\x02\x01\x02DELAY\x010\x02"
    assert decode_properties(raw) == {"TAGS": "TagA", "DELAY": "0"}


def test_decode_keeps_empty_values_and_splits_at_the_first_separator() -> None:
    assert decode_properties("TAGS\x01\x02") == {"TAGS": ""}
    assert decode_properties("A\x01x\x01y\x02") == {"A": "x\x01y"}


def test_decode_skips_items_without_a_name_value_separator() -> None:
    assert decode_properties("junk\x02\x02TAGS\x01TagA\x02") == {"TAGS": "TagA"}
    assert decode_properties("") == {}


def test_bytes_variants() -> None:
    assert encode_properties_bytes({"K": "vé"}) == "K\x01vé\x02".encode()
    assert decode_properties_bytes(memoryview(b"K\x01v\x02")) == {"K": "v"}
    assert decode_properties_bytes(b"") == {}
    with pytest.raises(ValueError):
        decode_properties_bytes(b"K\x01\xff\x02")


_safe_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    max_size=20,
)


@settings(max_examples=150)
@given(st.dictionaries(_safe_text.filter(bool), _safe_text, max_size=8))
def test_round_trip(mapping: dict[str, str]) -> None:
    assert decode_properties(encode_properties(mapping)) == mapping
    assert decode_properties_bytes(encode_properties_bytes(mapping)) == mapping


def test_key_values_match_rocketmq_message_const() -> None:
    expected = {
        props.WAIT: "WAIT",
        props.DELAY: "DELAY",
        props.REAL_QID: "REAL_QID",
        props.TRAN_MSG: "TRAN_MSG",
        props.PGROUP: "PGROUP",
        props.UNIQ_KEY: "UNIQ_KEY",
        props.TRACE_ON: "TRACE_ON",
        props.CONSUME_START_TIME: "CONSUME_START_TIME",
        props.SHARDING_KEY: "__SHARDINGKEY",
        props.FIRST_POP_TIME: "1ST_POP_TIME",
        props.START_DELIVER_TIME: "__STARTDELIVERTIME",
        props.TIMER_DELAY_MS: "TIMER_DELAY_MS",
        props.TRAN_PREPARED_QUEUE_OFFSET: "TRAN_PREPARED_QUEUE_OFFSET",
    }
    for constant, value in expected.items():
        assert constant == value
    assert props.UNIQ_KEY in props.SYSTEM_KEYS
    assert props.SHARDING_KEY not in props.SYSTEM_KEYS


# -- Message accessors --------------------------------------------------------


def test_message_accessors_read_and_write_properties() -> None:
    message = Message("TopicTest", b"hi")
    assert message.tags is None
    assert message.keys == []
    assert message.delay_level == 0
    assert message.unique_key is None
    assert message.wait_store_msg_ok is True

    message.tags = "TagA"
    message.keys = ["k1", "k2"]
    message.delay_level = 3
    message.unique_key = "ABC"
    message.wait_store_msg_ok = False
    assert message.properties == {
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "UNIQ_KEY": "ABC",
        "WAIT": "false",
    }
    assert message.keys == ["k1", "k2"]
    assert message.delay_level == 3
    assert message.wait_store_msg_ok is False

    message.tags = None
    message.keys = "  "
    assert "TAGS" not in message.properties
    assert "KEYS" not in message.properties


def test_keys_split_ignores_repeated_spaces() -> None:
    message = Message("T", properties={"KEYS": "a  b "})
    assert message.keys == ["a", "b"]


def test_message_ext_is_a_message_with_keyword_only_stored_fields() -> None:
    ext = MessageExt("T", b"x", queue_id=2, queue_offset=7)
    assert isinstance(ext, Message)
    assert (ext.queue_id, ext.queue_offset, ext.msg_id) == (2, 7, "")


def test_message_queue_orders_like_java() -> None:
    queues = [
        MessageQueue("b", "broker-a", 0),
        MessageQueue("a", "broker-b", 1),
        MessageQueue("a", "broker-a", 3),
        MessageQueue("a", "broker-a", 1),
    ]
    assert sorted(queues) == [
        MessageQueue("a", "broker-a", 1),
        MessageQueue("a", "broker-a", 3),
        MessageQueue("a", "broker-b", 1),
        MessageQueue("b", "broker-a", 0),
    ]
    assert len({MessageQueue("a", "b", 1), MessageQueue("a", "b", 1)}) == 1


_WAIT_VALUES = st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), max_size=12)


@given(_WAIT_VALUES | st.sampled_from(["true", "TRUE", "True", "tRuE", "false", "FALSE", ""]))
def test_wait_is_read_as_javas_boolean_parse(value: str) -> None:
    """Java's Message.isWaitStoreMsgOK: absent waits, else Boolean.parseBoolean
    ("true" in any letter case). The client's Message and the broker's reading
    of a property string agree with it."""
    expected = value.lower() == "true"
    assert props.wait_store_msg_ok(value) is expected
    assert Message("T", b"x", properties={props.WAIT: value}).wait_store_msg_ok is expected
    encoded = props.encode_properties({props.TAGS: "a", props.WAIT: value, props.KEYS: "k"})
    assert waits_for_store(encoded) is expected


def test_an_absent_wait_waits() -> None:
    assert props.wait_store_msg_ok(None) is True
    assert Message("T", b"x").wait_store_msg_ok is True
    assert waits_for_store("") is True
    assert waits_for_store(props.encode_properties({props.KEYS: "WAIT"})) is True
    assert waits_for_store(props.encode_properties({"AWAIT": "false"})) is True
    assert waits_for_store(props.encode_properties({props.WAIT: "false"})) is False
