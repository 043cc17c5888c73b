"""Which time a message asks for, and how it is parked."""

from __future__ import annotations

import pytest

from tidemq.common import properties as props
from tidemq.testing.stores import make_message
from tidemq.timer import (
    TIMER_TOPIC,
    TimerPropertyError,
    delete_key,
    park,
    recall_marker,
    requested_deliver_ms,
)

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({}, None),
        ({"TAGS": "a"}, None),
        ({props.TIMER_DELAY_SEC: "10"}, NOW + 10_000),
        ({props.TIMER_DELAY_MS: "1500"}, NOW + 1_500),
        ({props.TIMER_DELIVER_MS: str(NOW + 42)}, NOW + 42),
        ({props.START_DELIVER_TIME: str(NOW + 7)}, NOW + 7),
        ({props.TIMER_DELIVER_MS: str(NOW - 60_000)}, NOW - 60_000),  # past: caller delivers now
        ({props.TIMER_DELAY_SEC: " 3 "}, NOW + 3_000),
        # precedence: SEC, then MS, then DELIVER_MS, then __STARTDELIVERTIME
        ({props.TIMER_DELAY_MS: "5", props.TIMER_DELAY_SEC: "1"}, NOW + 1_000),
        ({props.TIMER_DELIVER_MS: "9", props.TIMER_DELAY_MS: "5"}, NOW + 5),
        ({props.START_DELIVER_TIME: "9", props.TIMER_DELIVER_MS: "8"}, 8),
    ],
)
def test_requested_deliver_ms(table: dict[str, str], expected: int | None) -> None:
    assert requested_deliver_ms(table, NOW) == expected


@pytest.mark.parametrize(
    "table",
    [
        {props.TIMER_DELAY_SEC: "ten"},
        {props.TIMER_DELAY_MS: "1.5"},
        {props.TIMER_DELIVER_MS: ""},
        {props.START_DELIVER_TIME: "0x10"},
        {props.TIMER_DELIVER_MS: "9" * 30},
    ],
)
def test_bad_values_are_refused_readably(table: dict[str, str]) -> None:
    with pytest.raises(TimerPropertyError, match="timer property"):
        requested_deliver_ms(table, NOW)


def test_park_keeps_everything_byte_for_byte() -> None:
    raw = (
        "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02"
        "odd\x01a\x01b\x02TIMER_DELAY_SEC\x015\x02"
    )
    message = make_message("Real", b"\x00body", queue_id=3, flag=7, sys_flag=0, born_port=99)
    message.properties = raw
    parked = park(message, NOW + 5_000)
    assert parked.topic == TIMER_TOPIC and parked.queue_id == 0
    assert parked.tags_code == NOW + 5_000
    assert parked.properties.startswith(raw)
    added = props.decode_properties(parked.properties[len(raw) :])
    assert added == {"REAL_TOPIC": "Real", "REAL_QID": "3", "TIMER_OUT_MS": str(NOW + 5_000)}
    assert (parked.body, parked.flag, parked.born_port) == (b"\x00body", 7, 99)
    assert message.topic == "Real"  # the original is untouched
    with pytest.raises(ValueError, match="already parked"):
        park(parked, NOW)


def test_recall_marker() -> None:
    assert delete_key("Topic", "U1") == "Topic+U1"
    marker = recall_marker("Topic", "U1", NOW + 9)
    table = props.decode_properties(marker.properties)
    assert table[props.TIMER_DEL_UNIQKEY] == "Topic+U1"
    assert table[props.TIMER_OUT_MS] == str(NOW + 9)
    assert (marker.topic, marker.queue_id, marker.tags_code) == (TIMER_TOPIC, 0, NOW + 9)
