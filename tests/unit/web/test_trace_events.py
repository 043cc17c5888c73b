"""trace_events: a Timeline flattened into the dashboard's list of events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.trace.timeline import (
    DeadLetter,
    Delivery,
    GroupTrace,
    SentStep,
    StoredStep,
    Timeline,
)
from tidemq.web.api_trace import trace_events


def sent(at: int) -> SentStep:
    return SentStep(
        group="P",
        client_host="10.0.0.5",
        timestamp_ms=at,
        cost_ms=3,
        success=True,
        topic="Orders",
        tags=None,
        keys="k",
        store_host="127.0.0.1:10911",
        offset_msg_id="OFF",
        body_length=5,
        message_type="Normal_Msg",
        region_id="DefaultRegion",
    )


def delivery(attempt: int, at: int, success: bool | None) -> Delivery:
    return Delivery(
        attempt=attempt,
        request_id=f"r{attempt}",
        client_host="10.0.0.7",
        timestamp_ms=at,
        retry_times=attempt - 1,
        cost_ms=None if success is None else 10,
        success=success,
        return_type=None,
    )


def test_a_send_a_store_two_deliveries_and_a_dead_letter_in_time_order() -> None:
    timeline = Timeline(
        msg_id="ID",
        trace_topic="RMQ_SYS_TRACE_TOPIC",
        topic="Orders",
        sent=(sent(100),),
        stored=StoredStep("127.0.0.1:10911", "OFF", store_timestamp_ms=101),
        groups=(
            GroupTrace(
                "G",
                (delivery(1, 200, False), delivery(2, 300, False)),
                "DEAD_LETTERED",
                DeadLetter("%DLQ%G", 310, "OFF2"),
            ),
        ),
    )
    events = trace_events(timeline)
    assert [(e["type"], e["status"], e["retry_times"]) for e in events] == [
        ("SEND", "SUCCESS", 0),
        ("STORE", "SUCCESS", 0),
        ("CONSUME", "FAILED", 0),
        ("CONSUME", "FAILED", 1),
        ("DLQ", None, 1),
    ]
    assert events[-1]["dlq_topic"] == "%DLQ%G"
    assert events[0]["group"] == "P" and events[2]["group"] == "G"


def test_a_delivery_still_in_progress_has_no_status() -> None:
    timeline = Timeline(
        "ID", "T", "Orders", groups=(GroupTrace("G", (delivery(1, 5, None),), "IN_PROGRESS"),)
    )
    (event,) = trace_events(timeline)
    assert event["status"] is None and event["cost_ms"] is None


@given(
    st.lists(st.integers(0, 10**13), max_size=4),
    st.lists(st.lists(st.integers(0, 10**13), min_size=1, max_size=4), max_size=3),
)
def test_one_event_per_step_oldest_first(send_times: list[int], groups: list[list[int]]) -> None:
    timeline = Timeline(
        "ID",
        "T",
        "Orders",
        sent=tuple(sent(at) for at in send_times),
        groups=tuple(
            GroupTrace(
                f"G{i}", tuple(delivery(n + 1, at, True) for n, at in enumerate(times)), "CONSUMED"
            )
            for i, times in enumerate(groups)
        ),
    )
    events = trace_events(timeline)
    assert len(events) == len(send_times) + sum(len(times) for times in groups)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
