"""The SimpleConsumer rebuilds each popped record's receipt handle and
attempt from the pop response header exactly as the broker made them."""

from __future__ import annotations

from tidemq.broker.pop.api import PoppedMessage, PopResult
from tidemq.broker.pop.receipts import ReceiptHandle
from tidemq.broker.processors.pop import pop_response_header
from tidemq.client.consumer.simple import rebuild_receipts
from tidemq.common.message import MessageExt


def _popped(topic_type: int, queue_id: int, start: int, offset: int, attempt: int) -> PoppedMessage:
    handle = ReceiptHandle(start, 1_000, 30_000, 0, topic_type, "broker-a", queue_id, offset)
    return PoppedMessage(b"", "T", queue_id, offset, handle.text(), attempt)


def test_handles_and_attempts_round_trip() -> None:
    popped = [
        _popped(1, 0, 7, 7, 3),
        _popped(1, 0, 7, 8, 2),
        _popped(0, 2, 40, 40, 1),
        _popped(0, 2, 40, 41, 1),
        _popped(0, 3, 5, 5, 4),
    ]
    header = pop_response_header(PopResult(popped, pop_ms=1_000, invisible_ms=30_000))
    records = [
        MessageExt(
            topic="%RETRY%G_T" if p.receipt_handle.split()[4] == "1" else "T",
            queue_id=p.queue_id,
            queue_offset=p.queue_offset,
        )
        for p in popped
    ]
    rebuilt = rebuild_receipts(header, records, "broker-a", "T")
    assert [r.receipt_handle for r in rebuilt] == [p.receipt_handle for p in popped]
    assert [r.delivery_attempt for r in rebuilt] == [p.delivery_attempt for p in popped]
    assert all(r.topic == "T" for r in rebuilt)
