"""Retry and DLQ routing: CONSUMER_SEND_MSG_BACK copies and the SEND_MESSAGE fallback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.retry import (
    RETRY_BASE_LEVEL,
    build_send_back,
    group_of,
    retry_route_for_send,
    split_address,
)
from tidemq.broker.schedule import DelayScheduler, delivery_message
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt
from tidemq.common.message_id import offset_message_id
from tidemq.common.names import dlq_topic_of, is_dlq_topic, is_retry_topic, retry_topic_of
from tidemq.record.codec import decode_record
from tidemq.store.api import MessageToStore
from tidemq.store.config import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, parse_delay_levels
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import small_config

STORE_IP = b"\x7f\x00\x00\x01"
STORE_PORT = 20911


def stored_record(
    message: MessageToStore,
    physical_offset: int,
    *,
    queue_offset: int = 0,
    store_timestamp: int = 1_700_000_000_000,
) -> MessageExt:
    """What decode_record gives back for `message` once stored at `physical_offset`."""
    return MessageExt(
        topic=message.topic,
        body=message.body,
        flag=message.flag,
        properties=props.decode_properties(message.properties),
        queue_id=message.queue_id,
        queue_offset=queue_offset,
        sys_flag=message.sys_flag,
        born_timestamp=message.born_timestamp,
        born_host=f"{'.'.join(str(b) for b in message.born_host)}:{message.born_port}",
        store_timestamp=store_timestamp,
        store_host="127.0.0.1:20911",
        msg_id=offset_message_id(STORE_IP, STORE_PORT, physical_offset),
        commit_log_offset=physical_offset,
        reconsume_times=message.reconsume_times,
    )


def original_message(**fields: object) -> MessageToStore:
    base = MessageToStore(
        topic="TopicTest",
        queue_id=2,
        body=b'{"room":"1","msg":"1"}',
        properties=props.encode_properties({props.TAGS: "TagA", props.KEYS: "k1 k2"}),
        born_timestamp=1_795_321_024_607,
        born_host=b"\x0a\x00\x00\x05",
        born_port=50123,
    )
    for name, value in fields.items():
        setattr(base, name, value)
    return base


# -- names ---------------------------------------------------------------------------


def test_topic_names() -> None:
    assert retry_topic_of("GID_test") == "%RETRY%GID_test"
    assert dlq_topic_of("GID_test") == "%DLQ%GID_test"
    assert is_retry_topic("%RETRY%GID_test")
    assert not is_retry_topic("%DLQ%GID_test")
    assert not is_retry_topic("TopicTest")
    assert is_dlq_topic("%DLQ%g")
    assert group_of("%RETRY%g") == "g"
    assert group_of("%DLQ%g") == "g"
    assert group_of("TopicTest") is None


def test_split_address() -> None:
    assert split_address("10.0.0.5:50123") == (b"\x0a\x00\x00\x05", 50123)
    assert split_address("[::1]:9") == (b"\x00" * 15 + b"\x01", 9)


# -- golden case: protocol-remoting.md §6.7 -------------------------------------------


def test_golden_first_send_back_from_ali_ons() -> None:
    """ali-ons' handler fails on a fresh message: 36 CONSUMER_SEND_MSG_BACK with
    delayLevel 0 and maxReconsumeTimes 16. The copy goes to %RETRY%<group>
    queue 0 at level 3 (10 s) with reconsume times 1, RETRY_TOPIC = the
    original topic and ORIGIN_MESSAGE_ID = the record's msgId."""
    record = stored_record(original_message(sys_flag=sysflag.COMPRESSED, flag=3), 0)
    assert record.msg_id == "7F000001000051AF0000000000000000"  # the doc's example id
    copy, level = build_send_back(record, "GID_test", 0, 16, b"\x7f\x00\x00\x01", 1)
    assert level == 3
    assert (copy.topic, copy.queue_id) == ("%RETRY%GID_test", 0)
    assert copy.reconsume_times == 1
    assert copy.body == record.body
    assert copy.flag == 3
    assert copy.sys_flag == sysflag.COMPRESSED  # the stored (compressed) body and its bit
    assert copy.born_timestamp == 1_795_321_024_607
    assert copy.tags_code is None
    assert props.decode_properties(copy.properties) == {
        props.TAGS: "TagA",
        props.KEYS: "k1 k2",
        props.RETRY_TOPIC: "TopicTest",
        props.ORIGIN_MESSAGE_ID: "7F000001000051AF0000000000000000",
        props.WAIT: "false",
        props.DELAY: "3",
    }


def test_golden_born_host_defaults_to_the_record() -> None:
    record = stored_record(original_message(), 0)
    copy, _ = build_send_back(record, "g", 0, 16)
    assert (copy.born_host, copy.born_port) == (b"\x0a\x00\x00\x05", 50123)
    copy, _ = build_send_back(record, "g", 0, 16, b"\x7f\x00\x00\x01", 7)
    assert (copy.born_host, copy.born_port) == (b"\x7f\x00\x00\x01", 7)


def test_golden_m_plus_one_deliveries_then_dlq() -> None:
    """maxReconsumeTimes M = 2: the handler sees the message with reconsume
    times 0, 1, 2 (M + 1 times); the third send-back goes to the DLQ."""
    record = stored_record(original_message(), 0)
    first_id = record.msg_id
    seen = []
    physical = 1000
    while True:
        seen.append(record.reconsume_times)
        copy, level = build_send_back(record, "GID_test", 0, 2)
        if copy.topic == dlq_topic_of("GID_test"):
            break
        assert level == RETRY_BASE_LEVEL + record.reconsume_times
        record = stored_record(copy, physical)
        physical += 1000
    assert seen == [0, 1, 2]
    assert level == 0
    assert (copy.topic, copy.queue_id, copy.reconsume_times) == ("%DLQ%GID_test", 0, 3)
    parsed = props.decode_properties(copy.properties)
    assert parsed[props.ORIGIN_MESSAGE_ID] == first_id
    assert parsed[props.RETRY_TOPIC] == "TopicTest"
    assert props.DELAY not in parsed


def test_golden_through_the_store_and_the_scheduler(tmp_path: Path) -> None:
    """The record as the broker finds it (by commit-log offset), the copy
    parked by the scheduler, and the message re-stored after 10 s."""
    clock = ManualClock()
    store = MemoryMessageStore(small_config(tmp_path), clock=clock)
    levels = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    scheduler = DelayScheduler(store, levels, tmp_path / "p.json", clock, store.put_message)
    original = original_message(properties="TAGS\x01TagA\x02\x01\x02")  # ali-ons' empty pair
    first = store.append([original]).results[0]
    buf = store.read_by_physical_offset(first.physical_offset)
    assert buf is not None
    record, _ = decode_record(buf)
    copy, level = build_send_back(record, "GID_test", 0, 16)
    parked = scheduler.schedule(copy, level)
    assert (parked.topic, parked.queue_id) == (SCHEDULE_TOPIC, 2)
    stored = store.append([parked]).results[0]
    # parked in level 3's queue
    probe = store.get_messages("g", SCHEDULE_TOPIC, 2, 0, 1)
    assert probe.physical_offsets == [stored.physical_offset]
    parked_buf = store.read_by_physical_offset(stored.physical_offset)
    assert parked_buf is not None
    parked_record, _ = decode_record(parked_buf)
    delivered = delivery_message(parked_record)
    assert (delivered.topic, delivered.queue_id) == ("%RETRY%GID_test", 0)
    assert delivered.reconsume_times == 1
    parsed = props.decode_properties(delivered.properties)
    assert parsed[props.RETRY_TOPIC] == "TopicTest"
    assert parsed[props.ORIGIN_MESSAGE_ID] == first.msg_id
    assert parsed[props.REAL_TOPIC] == "%RETRY%GID_test"
    assert props.DELAY not in parsed


# -- properties (Hypothesis) -------------------------------------------------------

prop_keys = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    min_size=1,
    max_size=8,
)
prop_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x02"),
    max_size=8,
)
groups = st.text(alphabet="abcXYZ_-019", min_size=1, max_size=12)
topics = st.text(alphabet="abcXYZ_-019", min_size=1, max_size=12)


@st.composite
def records(draw: st.DrawFn) -> MessageExt:
    user = draw(st.dictionaries(prop_keys, prop_values, max_size=4))
    for system in (props.RETRY_TOPIC, props.ORIGIN_MESSAGE_ID, props.DELAY, props.WAIT):
        user.pop(system, None)
    if draw(st.booleans()):
        user[props.RETRY_TOPIC] = draw(topics)
    if draw(st.booleans()):
        user[props.ORIGIN_MESSAGE_ID] = draw(st.sampled_from(["", " ", "ABCDEF0123456789"]))
    message = MessageToStore(
        topic=draw(topics),
        queue_id=draw(st.integers(0, 15)),
        body=draw(st.binary(max_size=32)),
        properties=props.encode_properties(user),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        sys_flag=draw(st.sampled_from([0, sysflag.COMPRESSED, sysflag.MULTI_TAGS | 1])),
        born_timestamp=draw(st.integers(0, 2**42)),
        born_host=bytes(draw(st.lists(st.integers(0, 255), min_size=4, max_size=4))),
        born_port=draw(st.integers(0, 65535)),
        reconsume_times=draw(st.integers(0, 40)),
    )
    return stored_record(message, draw(st.integers(0, 2**40)))


@settings(max_examples=300, deadline=None)
@given(records(), groups, st.integers(-3, 30), st.integers(0, 32))
def test_send_back_invariants(
    record: MessageExt, group: str, delay_level: int, max_times: int
) -> None:
    copy, level = build_send_back(record, group, delay_level, max_times)
    parsed = props.decode_properties(copy.properties)

    assert copy.reconsume_times == record.reconsume_times + 1
    to_dlq = record.reconsume_times >= max_times or delay_level < 0
    if to_dlq:
        assert (copy.topic, copy.queue_id, level) == (dlq_topic_of(group), 0, 0)
        assert props.DELAY not in parsed
    else:
        assert (copy.topic, copy.queue_id) == (retry_topic_of(group), 0)
        expected = 3 + record.reconsume_times if delay_level == 0 else delay_level
        assert level == expected > 0
        assert parsed[props.DELAY] == str(level)
    assert parsed[props.RETRY_TOPIC] == record.properties.get(props.RETRY_TOPIC, record.topic)
    origin = record.properties.get(props.ORIGIN_MESSAGE_ID, "")
    assert parsed[props.ORIGIN_MESSAGE_ID] == (origin if origin.strip() else record.msg_id)
    assert parsed[props.WAIT] == "false"
    for key, value in record.properties.items():
        if key not in (props.RETRY_TOPIC, props.ORIGIN_MESSAGE_ID, props.DELAY, props.WAIT):
            assert parsed[key] == value
    assert (copy.body, copy.flag, copy.sys_flag, copy.born_timestamp) == (
        record.body,
        record.flag,
        record.sys_flag,
        record.born_timestamp,
    )
    assert split_address(record.born_host) == (copy.born_host, copy.born_port)


@settings(max_examples=100, deadline=None)
@given(records(), groups, st.integers(1, 20), st.lists(st.integers(0, 5), max_size=8))
def test_origin_message_id_is_stable_across_send_backs(
    first: MessageExt, group: str, max_times: int, levels: list[int]
) -> None:
    origin = first.properties.get(props.ORIGIN_MESSAGE_ID, "")
    expected = origin if origin.strip() else first.msg_id
    retry_topic_value = first.properties.get(props.RETRY_TOPIC, first.topic)
    record = first
    physical = first.commit_log_offset + 1
    for delay_level in levels:
        copy, level = build_send_back(record, group, delay_level, max_times)
        parsed = props.decode_properties(copy.properties)
        assert parsed[props.ORIGIN_MESSAGE_ID] == expected
        assert parsed[props.RETRY_TOPIC] == retry_topic_value
        assert copy.reconsume_times == record.reconsume_times + 1
        if level == 0:
            break
        # parked, then delivered into the retry topic with a new msg id
        record = stored_record(copy, physical)
        physical += 1


@settings(max_examples=200, deadline=None)
@given(
    groups,
    st.integers(0, 40),
    st.one_of(st.none(), st.integers(0, 40)),
    st.integers(0, 40),
)
def test_send_to_a_retry_topic_goes_to_the_dlq_past_the_max(
    group: str, times: int, header_max: int | None, group_max: int
) -> None:
    topic, is_dlq = retry_route_for_send(retry_topic_of(group), times, header_max, group_max)
    limit = group_max if header_max is None else header_max
    assert is_dlq == (times >= limit)
    assert topic == (dlq_topic_of(group) if is_dlq else retry_topic_of(group))


def test_send_to_other_topics_is_never_rerouted() -> None:
    assert retry_route_for_send("TopicTest", 99, 1, 1) == ("TopicTest", False)
    assert retry_route_for_send("%DLQ%g", 99, 1, 1) == ("%DLQ%g", False)


def test_ali_ons_fallback_send_matches_the_send_back_rule() -> None:
    """ali-ons' fallback sends header j = reconsumeTimes + 1 and l = M + 1: the DLQ
    is reached exactly when the send-back would have gone there (reconsumeTimes >= M)."""
    m = 16
    for reconsume_times in range(0, 20):
        _, is_dlq = retry_route_for_send(retry_topic_of("g"), reconsume_times + 1, m + 1, 16)
        assert is_dlq == (reconsume_times >= m)
