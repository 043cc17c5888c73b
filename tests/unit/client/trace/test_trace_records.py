"""The trace data format against Java's: hand-built strings in the exact layout
apache/rocketmq's TraceDataEncoder writes (client/src/main/java/org/apache/
rocketmq/client/trace/TraceDataEncoder.java, encoderFromContextBean: the
fields in the order appended there, each followed by TraceConstants.CONTENT_SPLITOR
= (char) 1, the record ended by FIELD_SPLITOR = (char) 2 instead of the last
one; SubAfter ends `contextCode, 1, timestamp, 1, groupName, 2`, or in the
CLOUD channel `contextCode, 1, 2`), decoded into the fields Java's
decoderFromTraceDataString reads; ours encodes the same records to the same
strings. Then round trips (hypothesis) and fuzzing of the decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client.trace.records import (
    TRANSACTION_STATES,
    ConsumeReturnType,
    EndTransactionRecord,
    PubRecord,
    RecallRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceFormatError,
    TraceMessageType,
    TraceRecord,
    decode_record,
    decode_trace_data,
    encode_record,
    encode_records,
    record_keys,
)

C = "\x01"  # TraceConstants.CONTENT_SPLITOR
F = "\x02"  # TraceConstants.FIELD_SPLITOR

MSG_ID = "7F0000011B5C18B4AAC2720B5D100000"
OFFSET_ID = "C0A8010100002A9F000000000003C2A0"

# Java's Pub: Pub, timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
# bodyLength, costTime, msgType.ordinal(), offsetMsgId, isSuccess.
JAVA_PUB = (
    C.join(
        [
            "Pub",
            "1700000000123",
            "DefaultRegion",
            "OrderProducers",
            "TopicTest",
            MSG_ID,
            "TagA",
            "order-1 order-2",
            "192.168.1.1:10911",
            "11",
            "5",
            "0",
            OFFSET_ID,
            "true",
        ]
    )
    + F
)
PUB = PubRecord(
    timestamp_ms=1700000000123,
    region_id="DefaultRegion",
    group="OrderProducers",
    topic="TopicTest",
    msg_id=MSG_ID,
    tags="TagA",
    keys="order-1 order-2",
    store_host="192.168.1.1:10911",
    body_length=11,
    cost_ms=5,
    msg_type=TraceMessageType.NORMAL,
    offset_msg_id=OFFSET_ID,
    success=True,
)
# A message without tags or keys: StringBuilder.append(null) writes "null".
JAVA_PUB_NULLS = (
    C.join(
        [
            "Pub",
            "1700000000123",
            "DefaultRegion",
            "OrderProducers",
            "TopicTest",
            MSG_ID,
            "null",
            "null",
            "192.168.1.1:10911",
            "11",
            "5",
            "1",
            OFFSET_ID,
            "false",
        ]
    )
    + F
)
# SubBefore, once per message of the listener call: SubBefore, timeStamp, regionId,
# groupName, requestId, msgId, retryTimes, keys.
JAVA_SUB_BEFORE = (
    C.join(
        [
            "SubBefore",
            "1700000001000",
            "DefaultRegion",
            "OrderConsumers",
            "0A0B0C0D0E0F",
            MSG_ID,
            "2",
            "order-1",
        ]
    )
    + F
)
SUB_BEFORE = SubBeforeRecord(
    timestamp_ms=1700000001000,
    region_id="DefaultRegion",
    group="OrderConsumers",
    request_id="0A0B0C0D0E0F",
    msg_id=MSG_ID,
    retry_times=2,
    keys="order-1",
)
# SubAfter: SubAfter, requestId, msgId, costTime, isSuccess, keys, contextCode, then
# (accessChannel not CLOUD) timeStamp, groupName.
JAVA_SUB_AFTER = (
    C.join(
        [
            "SubAfter",
            "0A0B0C0D0E0F",
            MSG_ID,
            "3",
            "false",
            "order-1",
            "4",
            "1700000001003",
            "OrderConsumers",
        ]
    )
    + F
)
SUB_AFTER = SubAfterRecord(
    request_id="0A0B0C0D0E0F",
    msg_id=MSG_ID,
    cost_ms=3,
    success=False,
    keys="order-1",
    context_code=ConsumeReturnType.FAILED,
    timestamp_ms=1700000001003,
    group="OrderConsumers",
)
JAVA_SUB_AFTER_CLOUD = C.join(["SubAfter", "0A0B", MSG_ID, "3", "true", "null", "0"]) + C + F
SUB_AFTER_CLOUD = SubAfterRecord("0A0B", MSG_ID, 3, True, None, 0, None, None)
# EndTransaction: EndTransaction, timeStamp, regionId, groupName, topic, msgId, tags,
# keys, storeHost, msgType.ordinal(), transactionId, transactionState.name(),
# fromTransactionCheck.
JAVA_END_TRANSACTION = (
    C.join(
        [
            "EndTransaction",
            "1700000002000",
            "DefaultRegion",
            "PayProducers",
            "TopicTest",
            MSG_ID,
            "TagA",
            "pay-1",
            "192.168.1.1:10911",
            "2",
            MSG_ID,
            "ROLLBACK_MESSAGE",
            "true",
        ]
    )
    + F
)
END_TRANSACTION = EndTransactionRecord(
    timestamp_ms=1700000002000,
    region_id="DefaultRegion",
    group="PayProducers",
    topic="TopicTest",
    msg_id=MSG_ID,
    tags="TagA",
    keys="pay-1",
    store_host="192.168.1.1:10911",
    msg_type=TraceMessageType.TRANS_COMMIT,
    transaction_id=MSG_ID,
    transaction_state="ROLLBACK_MESSAGE",
    from_transaction_check=True,
)
# Recall: Recall, timeStamp, regionId, groupName, topic, msgId, isSuccess.
JAVA_RECALL = (
    C.join(
        ["Recall", "1700000003000", "DefaultRegion", "TimerProducers", "TopicTest", MSG_ID, "true"]
    )
    + F
)
RECALL = RecallRecord(1700000003000, "DefaultRegion", "TimerProducers", "TopicTest", MSG_ID, True)

GOLDEN: list[tuple[str, TraceRecord]] = [
    (JAVA_PUB, PUB),
    (JAVA_SUB_BEFORE, SUB_BEFORE),
    (JAVA_SUB_AFTER, SUB_AFTER),
    (JAVA_SUB_AFTER_CLOUD, SUB_AFTER_CLOUD),
    (JAVA_END_TRANSACTION, END_TRANSACTION),
    (JAVA_RECALL, RECALL),
]


@pytest.mark.parametrize(("java", "record"), GOLDEN)
def test_a_java_record_decodes_to_its_fields(java: str, record: TraceRecord) -> None:
    assert decode_trace_data(java).records == (record,)


@pytest.mark.parametrize(("java", "record"), GOLDEN)
def test_ours_encodes_the_same_string_as_java(java: str, record: TraceRecord) -> None:
    assert encode_record(record) == java


def test_a_java_trace_message_with_many_records_decodes_in_order() -> None:
    body = (JAVA_SUB_BEFORE + JAVA_SUB_AFTER + JAVA_PUB).encode()
    assert decode_trace_data(body).records == (SUB_BEFORE, SUB_AFTER, PUB)


def test_null_tags_and_keys_read_as_none_and_write_as_null() -> None:
    record = decode_record(JAVA_PUB_NULLS[:-1])
    assert isinstance(record, PubRecord)
    assert (record.tags, record.keys) == (None, None)
    assert (record.msg_type, record.success) == (TraceMessageType.TRANS_HALF, False)
    assert encode_record(record) == JAVA_PUB_NULLS


def test_the_older_pub_layouts_java_still_reads() -> None:
    fields = JAVA_PUB[:-1].split(C)
    # 13 fields: before offsetMsgId existed, the 13th is isSuccess
    old = decode_record(C.join([*fields[:12], "false"]))
    assert isinstance(old, PubRecord)
    assert (old.offset_msg_id, old.success) == ("", False)
    # 15 fields: an old client wrote its host too
    with_host = decode_record(C.join([*fields, "10.0.0.7"]))
    assert isinstance(with_host, PubRecord)
    assert (with_host.client_host, with_host.offset_msg_id) == ("10.0.0.7", OFFSET_ID)


def test_the_older_sub_after_layouts() -> None:
    six = decode_record(C.join(["SubAfter", "R", MSG_ID, "7", "true", "k"]))
    assert six == SubAfterRecord("R", MSG_ID, 7, True, "k", 0, None, None)
    seven = decode_record(C.join(["SubAfter", "R", MSG_ID, "7", "true", "k", "2"]))
    assert seven == SubAfterRecord("R", MSG_ID, 7, True, "k", 2, None, None)


def test_a_trailing_empty_field_java_split_drops_reads_as_empty() -> None:
    # Java's split drops the empty keys at the end; its decoder then throws. Ours reads "".
    record = decode_record(C.join(["SubBefore", "1", "r", "g", "req", MSG_ID, "0", ""]))
    assert isinstance(record, SubBeforeRecord)
    assert record.keys == ""


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (C.join(["Pub", "soon", *["x"] * 12]), "timestamp 'soon' is not a number"),
        (
            C.join(["Pub", "1", "r", "g", "t", "m", "t", "k", "h", "1", "2", "9", "o", "true"]),
            "msgType 9",
        ),
        (C.join(["Pub", "1", "r", "g"]), "fewer than 12"),
        (C.join(["SubBefore", "1", "r", "g", "req", "m", "1_0", "k"]), "retryTimes '1_0'"),
        (C.join(["SubBefore", "1", "r", "g", "req", "m", "99999999999", "k"]), "out of range"),
        (C.join(["SubAfter", "req", "m"]), "without costTime"),
        (
            C.join(
                ["EndTransaction", "1", "r", "g", "t", "m", "t", "k", "h", "2", "x", "DONE", "f"]
            ),
            "DONE",
        ),
        ("Pull" + C + "1", "unknown trace record type 'Pull'"),
    ],
)
def test_what_java_would_throw_on_is_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(TraceFormatError, match=problem):
        decode_record(text)


def test_a_bad_record_is_skipped_and_the_others_kept() -> None:
    body = JAVA_PUB + "SubBefore" + C + "later" + F + F + JAVA_RECALL
    decoded = decode_trace_data(body)
    assert decoded.records == (PUB, RECALL)
    assert len(decoded.skipped) == 1
    assert "timestamp 'later' is not a number" in decoded.skipped[0].reason


def test_keys_of_a_record_are_its_msg_id_and_message_keys() -> None:
    assert record_keys(PUB) == [MSG_ID, "order-1", "order-2"]
    assert record_keys(SUB_AFTER_CLOUD) == [MSG_ID]
    assert record_keys(RECALL) == [MSG_ID]


def test_a_separator_in_a_value_is_refused() -> None:
    bad = SubBeforeRecord(1, "r", "g", "req", MSG_ID, 0, "a" + C + "b")
    with pytest.raises(ValueError, match="separator"):
        encode_record(bad)


# -- round trips -------------------------------------------------------------------------

_text = st.text(
    st.characters(blacklist_characters=C + F, blacklist_categories=("Cs",)), max_size=30
)
_word = _text.filter(lambda s: s != "null")  # "null" is how Java writes None
_nullable = st.none() | _word
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)

pubs = st.builds(
    PubRecord,
    timestamp_ms=_int64,
    region_id=_text,
    group=_text,
    topic=_text,
    msg_id=_text,
    tags=_nullable,
    keys=_nullable,
    store_host=_text,
    body_length=_int32,
    cost_ms=_int32,
    msg_type=st.sampled_from(TraceMessageType),
    offset_msg_id=_text,
    success=st.booleans(),
    client_host=st.none(),
)
sub_befores = st.builds(
    SubBeforeRecord,
    timestamp_ms=_int64,
    region_id=_text,
    group=_text,
    request_id=_text,
    msg_id=_text,
    retry_times=_int32,
    keys=_nullable,  # "" as the last field: Java's split drops it, ours reads it back
)
sub_afters = st.one_of(
    st.builds(
        SubAfterRecord,
        request_id=_text,
        msg_id=_text,
        cost_ms=_int32,
        success=st.booleans(),
        keys=_nullable,
        context_code=_int32,
        timestamp_ms=_int64,
        group=_word,
    ),
    st.builds(
        SubAfterRecord,
        request_id=_text,
        msg_id=_text,
        cost_ms=_int32,
        success=st.booleans(),
        keys=_nullable,
        context_code=_int32,
        timestamp_ms=st.none(),
        group=st.none(),
    ),
)
end_transactions = st.builds(
    EndTransactionRecord,
    timestamp_ms=_int64,
    region_id=_text,
    group=_text,
    topic=_text,
    msg_id=_text,
    tags=_nullable,
    keys=_nullable,
    store_host=_text,
    msg_type=st.sampled_from(TraceMessageType),
    transaction_id=_nullable,
    transaction_state=st.sampled_from(TRANSACTION_STATES),
    from_transaction_check=st.booleans(),
)
recalls = st.builds(
    RecallRecord,
    timestamp_ms=_int64,
    region_id=_text,
    group=_text,
    topic=_text,
    msg_id=_text,
    success=st.booleans(),
)
records = st.one_of(pubs, sub_befores, sub_afters, end_transactions, recalls)


@given(st.lists(records, max_size=8))
def test_encode_then_decode_gives_the_records_back(items: list[TraceRecord]) -> None:
    decoded = decode_trace_data(encode_records(items).encode("utf-8"))
    assert decoded.skipped == ()
    assert decoded.records == tuple(items)


@given(records)
def test_encoding_is_stable_through_a_round_trip(record: TraceRecord) -> None:
    text = encode_record(record)
    assert encode_record(decode_record(text[:-1])) == text


# -- fuzzing -----------------------------------------------------------------------------

_pieces = st.sampled_from(
    [
        "Pub",
        "SubBefore",
        "SubAfter",
        "EndTransaction",
        "Recall",
        C,
        F,
        "1",
        "-",
        "true",
        "null",
        "",
        "x",
    ]
)


@settings(max_examples=500)
@given(st.lists(_pieces, max_size=40).map("".join))
def test_garbage_made_of_trace_pieces_never_crashes(text: str) -> None:
    decoded = decode_trace_data(text)
    for skipped in decoded.skipped:
        assert skipped.reason


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_skip(body: bytes) -> None:
    decoded = decode_trace_data(body)
    assert len(decoded.records) + len(decoded.skipped) <= body.count(F.encode()) + 1


@settings(max_examples=300)
@given(records, st.integers(0, 200), st.sampled_from(["", C, F, "9", "x"]))
def test_a_damaged_record_never_crashes(record: TraceRecord, at: int, inserted: str) -> None:
    text = encode_record(record)
    at = min(at, len(text))
    decode_trace_data(text[:at] + inserted + text[at:])
    decode_trace_data(text[:at])
