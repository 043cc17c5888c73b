"""Spark offsets of the tidemq source: the canonical form, range planning and
the per-trigger limit (properties over random backlogs)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.message import MessageQueue
from tidemq.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    canonical,
    limit_ranges,
    parse_position,
    plan_ranges,
    position_of,
    to_spark,
)

A0 = MessageQueue("T", "broker-a", 0)
A1 = MessageQueue("T", "broker-a", 1)
B0 = MessageQueue("T", "broker-b", 0)
U0 = MessageQueue("U", "broker-a", 0)


def test_round_trip_and_canonical_text() -> None:
    position = {B0: 7, A1: 3, A0: 0, U0: 12}
    assert position_of(to_spark(position)) == position
    assert canonical(position) == (
        '{"T":{"broker-a:0":0,"broker-a:1":3,"broker-b:0":7},"U":{"broker-a:0":12}}'
    )
    assert canonical(dict(reversed(list(position.items())))) == canonical(position)


def test_broker_names_with_colons_keep_the_last_one_as_separator() -> None:
    assert position_of({"T": {"host:1:3": 5}}) == {MessageQueue("T", "host:1", 3): 5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "JSON object"),
        ('{"T": {"broker-a": 1}}', "'<broker>:<queueId>'"),
        ('{"T": {"broker-a:x": 1}}', "'<broker>:<queueId>'"),
        ('{"T": {"broker-a:0": -3}}', ">= -2"),
        ('{"T": {"broker-a:0": 1.5}}', "integer"),
        ('{"T": {"broker-a:0": true}}', "integer"),
        ('{"T": 3}', "object of queue offsets"),
        ("{oops", "not valid JSON"),
    ],
)
def test_malformed_offsets_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_position(text)


def test_special_offsets_only_where_allowed() -> None:
    assert parse_position('{"T": {"broker-a:0": -2, "broker-a:1": -1}}') == {
        A0: EARLIEST,
        A1: LATEST,
    }
    with pytest.raises(ValueError, match=">= 0"):
        position_of({"T": {"broker-a:0": -1}})


def test_plan_ranges_skips_empty_queues_and_reads_new_queues_from_zero() -> None:
    ranges = plan_ranges({A0: 5, A1: 9}, {A0: 8, A1: 9, B0: 4})
    assert ranges == [OffsetRange(A0, 5, 8), OffsetRange(B0, 0, 4)]


queues = st.sampled_from([A0, A1, B0, U0])


@given(
    st.dictionaries(queues, st.tuples(st.integers(0, 1000), st.integers(0, 1000))),
    st.integers(1, 3000),
)
def test_limit_ranges_properties(spans: dict[MessageQueue, tuple[int, int]], budget: int) -> None:
    start = {mq: a for mq, (a, _) in spans.items()}
    latest = {mq: a + b for mq, (a, b) in spans.items()}
    end = limit_ranges(start, latest, budget)
    read = sum(end[mq] - start[mq] for mq in spans)
    backlog = sum(b for _, b in spans.values())
    assert read == min(budget, backlog)  # uses the whole budget, never more
    for mq in spans:
        assert start[mq] <= end[mq] <= latest[mq]  # no queue backwards or past its end
    if budget >= len([b for _, b in spans.values() if b]):
        assert all(end[mq] > start[mq] for mq, (_, b) in spans.items() if b)  # all progress


def test_limit_ranges_shares_in_proportion() -> None:
    end = limit_ranges({A0: 0, A1: 0}, {A0: 300, A1: 100}, 100)
    assert end == {A0: 75, A1: 25}
    with pytest.raises(ValueError, match="positive"):
        limit_ranges({A0: 0}, {A0: 1}, 0)
