"""Receipt handles: every well-formed handle round-trips; garbage is refused
with ReceiptHandleError, never anything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.pop.receipts import ReceiptHandle, parse_receipt_handle

offsets = st.integers(0, 2**62)


@st.composite
def handles(draw: st.DrawFn) -> ReceiptHandle:
    start = draw(offsets)
    return ReceiptHandle(
        start_offset=start,
        pop_ms=draw(offsets),
        invisible_ms=draw(st.integers(0, 12 * 3600 * 1000)),
        revive_qid=draw(st.integers(0, 64)),
        topic_type=draw(st.sampled_from([0, 1])),
        broker_name=draw(st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)),
        queue_id=draw(st.integers(0, 1023)),
        queue_offset=start + draw(st.integers(0, 1000)),
    )


@given(handles())
def test_round_trip(handle: ReceiptHandle) -> None:
    assert parse_receipt_handle(handle.text()) == handle
    assert handle.due_ms == handle.pop_ms + handle.invisible_ms


@given(st.text(max_size=80))
def test_garbage_is_refused_cleanly(text: str) -> None:
    try:
        parsed = parse_receipt_handle(text)
    except ReceiptHandleError as exc:
        assert "receipt handle is malformed" in exc.remark
    else:
        assert parse_receipt_handle(parsed.text()) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1 2 3",
        "0 1 2 0 0 broker-a 0 x",
        "0 1 2 0 7 broker-a 0 0",
        "5 1 2 0 0 broker-a 0 4",
        "-1 1 2 0 0 broker-a 0 0",
        "0 1 2 0 0  0 0",
        "0 " * 400,
    ],
)
def test_malformed_examples(text: str) -> None:
    with pytest.raises(ReceiptHandleError):
        parse_receipt_handle(text)
