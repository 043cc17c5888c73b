"""The exactly-once sink's ledger records: chunking, and which record is the
newest complete one when a crash left a partial one behind."""

from __future__ import annotations

from tidemq.spark import ledger
from tidemq.spark.ledger import (
    CommitRecord,
    Half,
    LedgerEntry,
    decode_chunk,
    encode_record,
    latest_complete,
    ledger_topic,
)


def halves(n: int, base: int = 0) -> tuple[Half, ...]:
    return tuple(
        Half(
            "broker-a",
            "T",
            base + i,
            1000 * (base + i),
            f"ID{base + i:08d}",
            "T/broker-a/1" if i % 2 else "",
        )
        for i in range(n)
    )


def entries(record: CommitRecord, first_offset: int) -> list[LedgerEntry]:
    return [
        decode_chunk(first_offset + i, properties, body)
        for i, (properties, body) in enumerate(encode_record(record))
    ]


def test_a_record_round_trips_in_chunks(monkeypatch: object) -> None:
    import pytest

    mp = pytest.MonkeyPatch()
    mp.setattr(ledger, "CHUNK_HALVES", 3)
    try:
        record = CommitRecord(7, halves(8))
        written = entries(record, 10)
        assert [(e.chunk, e.chunks) for e in written] == [(0, 3), (1, 3), (2, 3)]
        assert latest_complete(written) == record
    finally:
        mp.undo()


def test_an_empty_batch_is_one_message() -> None:
    record = CommitRecord(0, ())
    assert len(encode_record(record)) == 1
    assert latest_complete(entries(record, 0)) == record


def test_a_partial_record_is_passed_over_for_the_one_before() -> None:
    mp = __import__("pytest").MonkeyPatch()
    mp.setattr(ledger, "CHUNK_HALVES", 2)
    try:
        done = CommitRecord(4, halves(3))
        partial = entries(CommitRecord(5, halves(4, 100)), 2)[:1]  # crash after chunk 0 of 2
        assert latest_complete(entries(done, 0) + partial) == done
        # only the partial one in view: nothing complete here
        assert latest_complete(partial) is None
        # the newest complete record starts before what was read: read from its start
        assert latest_complete(entries(done, 0)[1:] + partial) == 0
    finally:
        mp.undo()


def test_foreign_messages_are_not_records() -> None:
    import pytest

    with pytest.raises(ValueError, match="not a commit record"):
        decode_chunk(3, {"SPARK_BATCH": "x"}, b"")
    with pytest.raises(ValueError, match="chunk"):
        decode_chunk(3, {"SPARK_BATCH": "1", "SPARK_CHUNK": "2/2"}, b"")


def test_ledger_topic_names() -> None:
    assert ledger_topic("orders") == "TIDEMQ_SINK_orders"
    import pytest

    with pytest.raises(ValueError, match="too long"):
        ledger_topic("x" * 120)
