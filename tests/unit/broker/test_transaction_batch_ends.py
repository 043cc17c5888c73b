"""TIDEMQ_END_TRANSACTIONS and the check-back: the halves a batch END names
are passed by the scan's progress without being read back, and what is left
unresolved is still checked."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.assembly import Features
from tidemq.broker.processors.transaction import end_items
from tidemq.broker.requests import SendRequest
from tidemq.broker.transactions import _EndedAhead
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import Message
from tidemq.common.message_id import decode_offset_message_id
from tidemq.record.codec import encode_batch
from tidemq.testing.cores import memory_core

GROUP = "PG_TX"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 60), max_size=12), max_size=8),
    st.lists(st.integers(0, 70), min_size=1, max_size=8),
)
def test_progress_moves_to_the_first_offset_not_ended(
    batches: list[list[int]], progress_points: list[int]
) -> None:
    ahead = _EndedAhead()
    ended: set[int] = set()
    progress = 0
    for batch, point in zip(batches, progress_points, strict=False):
        ahead.add(batch)
        ended.update(batch)
        expected = max(progress, point)  # the scan may have moved on meanwhile
        while expected in ended:
            expected += 1
        progress = ahead.advance(max(progress, point))
        assert progress == expected
        assert all(start > progress for start in ahead.starts)
        assert all(a < b for a, b in zip(ahead.starts, ahead.ends, strict=True))
        assert all(b < a for b, a in zip(ahead.ends, ahead.starts[1:], strict=False))


def test_runs_beyond_the_limit_are_left_to_the_scan() -> None:
    ahead = _EndedAhead()
    ahead.add(list(range(1, 3 * _EndedAhead._MAX_RUNS, 2)))  # every other offset: one run each
    assert len(ahead.starts) == _EndedAhead._MAX_RUNS
    assert ahead.advance(0) == 0  # offset 0 was not ended
    assert ahead.advance(1) == 2


async def test_a_batch_end_moves_the_check_back_past_its_halves(tmp_path: Path) -> None:
    features = Features(delay=False, timers=False, transactions=True, pop=False)
    core, _, clock = memory_core(tmp_path, features)
    tx = core.transactions
    assert tx is not None
    messages = [
        Message("TxTopic", f"m{i}".encode(), properties={props.UNIQ_KEY: f"U{i}"}) for i in range(6)
    ]
    sent = await core.send.send_half_batch(
        SendRequest(
            producer_group=GROUP,
            topic="TxTopic",
            queue_id=0,
            body=encode_batch(messages),
            sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
            born_timestamp=clock.now_ms(),
            batch=True,
        )
    )
    halves = [
        (decode_offset_message_id(offset_id)[2], sent.queue_offset + i)
        for i, offset_id in enumerate(sent.msg_id.split(","))
    ]
    assert await tx.end_many(GROUP, [(o, q, True) for o, q in halves[:3]]) == (3, 0)
    assert tx.progress == 3
    assert await tx.end_many(GROUP, [(o, q, False) for o, q in halves[4:]]) == (2, 0)
    assert tx.progress == 3  # half 3 is not ended: the scan stops there
    clock.advance(tx.config.transaction_timeout_ms / 1000 + 1)
    report = await tx.check_back.scan()
    assert (report.checked, report.skipped) == (1, 2)  # half 3 checked, 4 and 5 read and skipped
    assert await tx.end_many(GROUP, [(o, q, True) for o, q in halves[:2]]) == (0, 2)


def _reference_items(body: bytes) -> list[tuple[int, int, bool]]:
    """How the processor read TIDEMQ_END_TRANSACTIONS bodies before msgspec."""
    document = json.loads(body)
    return [(int(clo), int(qo), bool(commit)) for clo, qo, commit in document["items"]]


JSON_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(0, 10**6).map(str),
    st.text(max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**40), st.booleans()),
            st.lists(JSON_VALUES, max_size=4),
        ),
        max_size=6,
    ),
    st.sampled_from(["", ',"extra":1', ',"items":[]', "x"]),
)
def test_end_bodies_read_as_before(items: list[object], tail: str) -> None:
    body = ('{"items":' + json.dumps(items) + tail + "}").encode()
    try:
        expected: object = _reference_items(body)
    except (ValueError, KeyError, TypeError) as exc:
        expected = type(exc)
    try:
        found: object = end_items(body)
    except (ValueError, KeyError, TypeError) as exc:
        found = type(exc)
    assert found == expected
