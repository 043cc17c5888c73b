"""One message's Timeline from its records (pure): deliveries paired by
request id per group, the group's status from its last delivery, client
hosts from the carrying trace messages, other messages' records ignored."""

from __future__ import annotations

import json

from tidemq.client.trace.records import (
    EndTransactionRecord,
    PubRecord,
    RecallRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceMessageType,
)
from tidemq.client.trace.timeline import (
    CONSUMED,
    DEAD_LETTERED,
    FAILED,
    IN_PROGRESS,
    CarriedRecord,
    DeadLetter,
    StoredStep,
    build_timeline,
)

ID = "ID1"
PRODUCER_HOST = "10.0.0.5:40000"
CONSUMER_HOST = "10.0.0.6:40001"


def pub(msg_id: str = ID, **changes: object) -> CarriedRecord:
    fields: dict[str, object] = {
        "timestamp_ms": 1_000,
        "region_id": "DefaultRegion",
        "group": "P",
        "topic": "Orders",
        "msg_id": msg_id,
        "tags": "TagA",
        "keys": None,
        "store_host": "10.0.0.1:10911",
        "body_length": 5,
        "cost_ms": 3,
        "msg_type": TraceMessageType.NORMAL,
        "offset_msg_id": "OFF1",
        "success": True,
    }
    fields.update(changes)
    return CarriedRecord(PubRecord(**fields), PRODUCER_HOST)  # type: ignore[arg-type]


def delivery(
    group: str, request: str, at: int, retry: int, success: bool | None, code: int = 0
) -> list[CarriedRecord]:
    carried = [
        CarriedRecord(
            SubBeforeRecord(at, "DefaultRegion", group, request, ID, retry, None), CONSUMER_HOST
        )
    ]
    if success is not None:
        after = SubAfterRecord(request, ID, 2, success, None, code, at + 2, group)
        carried.append(CarriedRecord(after, CONSUMER_HOST))
    return carried


def test_a_message_consumed_after_one_retry() -> None:
    records = [
        *delivery("G", "r2", 3_000, 1, True),  # out of order on purpose
        pub(),
        *delivery("G", "r1", 2_000, 0, False, code=4),
    ]
    timeline = build_timeline(ID, "RMQ_SYS_TRACE_TOPIC", records, trace_messages=3)
    assert timeline.found and timeline.topic == "Orders"
    [sent] = timeline.sent
    assert (sent.group, sent.client_host, sent.cost_ms, sent.success) == (
        "P",
        PRODUCER_HOST,
        3,
        True,
    )
    assert sent.message_type == "Normal_Msg"
    assert timeline.stored == StoredStep("10.0.0.1:10911", "OFF1")
    group = timeline.group("G")
    assert group is not None
    assert group.status == CONSUMED and group.retries == 1
    assert [(d.attempt, d.retry_times, d.success, d.return_type) for d in group.deliveries] == [
        (1, 0, False, "FAILED"),
        (2, 1, True, "SUCCESS"),
    ]
    assert group.deliveries[0].client_host == CONSUMER_HOST


def test_each_group_has_its_own_deliveries_and_status() -> None:
    records = [
        pub(),
        *delivery("A", "a1", 2_000, 0, True),
        *delivery("B", "b1", 2_100, 0, False, code=2),
        *delivery("C", "c1", 2_200, 0, None),
        *delivery("D", "d1", 2_300, 0, False),
        *delivery("D", "d2", 3_300, 1, False),
    ]
    dlq = DeadLetter("%DLQ%D", 3_400, "OFF9")
    timeline = build_timeline(ID, "T", records, dead_letters={"D": dlq})
    assert [(g.group, g.status) for g in timeline.groups] == [
        ("A", CONSUMED),
        ("B", FAILED),
        ("C", IN_PROGRESS),
        ("D", DEAD_LETTERED),
    ]
    assert timeline.groups[1].deliveries[0].return_type == "EXCEPTION"
    assert timeline.groups[2].deliveries[0].success is None
    assert timeline.groups[3].dead_letter == dlq


def test_records_of_other_messages_are_ignored() -> None:
    timeline = build_timeline(ID, "T", [pub("OTHER"), *delivery("G", "r", 1, 0, True)])
    assert timeline.sent == ()
    assert len(timeline.groups) == 1


def test_a_delivery_whose_sub_before_was_lost_still_shows() -> None:
    after = SubAfterRecord("r9", ID, 4, True, None, 0, 5_000, "G")
    timeline = build_timeline(ID, "T", [CarriedRecord(after, CONSUMER_HOST)])
    [group] = timeline.groups
    [only] = group.deliveries
    assert (only.timestamp_ms, only.success, only.retry_times) == (5_000, True, -1)


def test_a_record_read_twice_counts_once() -> None:
    twice = delivery("G", "r1", 2_000, 0, True) * 2
    [group] = build_timeline(ID, "T", twice).groups
    assert len(group.deliveries) == 1


def test_transaction_ends_and_recalls() -> None:
    end = EndTransactionRecord(
        4_000, "DefaultRegion", "P", "Orders", ID, None, None, "10.0.0.1:10911",
        TraceMessageType.TRANS_COMMIT, "TX", "COMMIT_MESSAGE", False,
    )  # fmt: skip
    recall = RecallRecord(4_500, "DefaultRegion", "P", "Orders", ID, True)
    timeline = build_timeline(
        ID, "T", [CarriedRecord(end, PRODUCER_HOST), CarriedRecord(recall, PRODUCER_HOST)]
    )
    [step] = timeline.transactions
    assert (step.state, step.transaction_id, step.client_host) == (
        "COMMIT_MESSAGE",
        "TX",
        PRODUCER_HOST,
    )
    assert timeline.recalls[0].success
    assert timeline.found


def test_an_old_client_named_its_host_in_the_record() -> None:
    old = pub(client_host="10.9.9.9")
    assert build_timeline(ID, "T", [old]).sent[0].client_host == "10.9.9.9"


def test_no_records_is_not_found_and_serialises() -> None:
    timeline = build_timeline(ID, "T", [], notes=["the trace topic T does not exist"])
    assert not timeline.found
    document = timeline.to_json()
    assert document["found"] is False and document["notes"] == ["the trace topic T does not exist"]
    json.dumps(build_timeline(ID, "T", [pub(), *delivery("G", "r", 2, 0, True)]).to_json())
