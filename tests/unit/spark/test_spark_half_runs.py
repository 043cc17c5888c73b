"""Halves as runs (`HalfRun`): they spell out the same halves in the same
order, ledger records of runs read back whole in any chunking, records of the
first format (one item per half) still read, and the END requests built from
runs carry what the requests built from halves carried."""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.spark import connection, ledger
from tidemq.spark.ledger import (
    BATCH_PROPERTY,
    CHUNK_PROPERTY,
    CommitRecord,
    Half,
    HalfRun,
    decode_chunk,
    encode_record,
    latest_complete,
)


@st.composite
def half_lists(draw: st.DrawFn) -> list[Half]:
    """Halves as a sink reports them: runs of consecutive queue offsets on a
    few brokers, topics and lanes, in any order."""
    halves: list[Half] = []
    for _ in range(draw(st.integers(0, 6))):
        broker = draw(st.sampled_from(["broker-a", "broker-b"]))
        topic = draw(st.sampled_from(["T", "Orders"]))
        lane = draw(st.sampled_from(["", f"{topic}/{broker}/1"]))
        first = draw(st.integers(0, 2**40))
        for i in range(draw(st.integers(1, 7))):
            offset = draw(st.integers(0, 2**62))
            halves.append(Half(broker, topic, first + i, offset, f"ID{first + i:08X}", lane))
    return halves


@settings(max_examples=300, deadline=None)
@given(half_lists())
def test_runs_spell_out_the_same_halves(halves: list[Half]) -> None:
    runs = HalfRun.of(halves)
    assert [half for run in runs for half in run.halves()] == halves
    assert sum(len(run) for run in runs) == len(halves)
    for run in runs:
        assert run.halves() == [h for part in _parts(run) for h in part.halves()]


def _parts(run: HalfRun) -> list[HalfRun]:
    return [run.part(start, 2) for start in range(0, len(run), 2)]


@settings(max_examples=200, deadline=None)
@given(half_lists(), st.integers(1, 9), st.integers(0, 100))
def test_a_record_of_runs_reads_back_in_any_chunking(
    halves: list[Half], chunk: int, first_offset: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ledger, "CHUNK_HALVES", chunk)
        record = CommitRecord(11, runs=HalfRun.of(halves))
        written = encode_record(record)
        assert len(written) == max(1, -(-len(halves) // chunk))
        entries = [
            decode_chunk(first_offset + i, properties, body)
            for i, (properties, body) in enumerate(written)
        ]
    found = latest_complete(entries)
    assert found == record == CommitRecord(11, halves)
    assert isinstance(found, CommitRecord) and found.halves == tuple(halves)


@settings(max_examples=100, deadline=None)
@given(half_lists())
def test_records_of_the_first_format_still_read(halves: list[Half]) -> None:
    """A ledger written before runs: one JSON item per half, level 6."""
    body = zlib.compress(json.dumps([h.to_json() for h in halves]).encode(), 6)
    entry = decode_chunk(4, {BATCH_PROPERTY: "9", CHUNK_PROPERTY: "0/1"}, body)
    assert latest_complete([entry]) == CommitRecord(9, halves)


def _old_bodies(halves: list[Half], commit: bool) -> dict[str, list[bytes]]:
    """What Connection.end_transactions sent per broker before runs."""
    by_broker: dict[str, list[Half]] = {}
    for half in halves:
        by_broker.setdefault(half.broker_name, []).append(half)
    return {
        broker: [
            json.dumps(
                {
                    "items": [
                        [h.commit_log_offset, h.queue_offset, commit]
                        for h in mine[first : first + connection.END_CHUNK]
                    ]
                },
                separators=(",", ":"),
            ).encode()
            for first in range(0, len(mine), connection.END_CHUNK)
        ]
        for broker, mine in by_broker.items()
    }


@settings(max_examples=200, deadline=None)
@given(half_lists(), st.booleans(), st.integers(1, 8))
def test_end_requests_from_runs_carry_the_halves_in_order(
    halves: list[Half], commit: bool, chunk: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection, "END_CHUNK", chunk)
        expected = _old_bodies(halves, commit)
        by_broker: dict[str, list[HalfRun]] = {}
        for run in HalfRun.of(halves):
            by_broker.setdefault(run.broker_name, []).append(run)
        found = {
            broker: [
                ('{"items":[' + ",".join(items) + "]}").encode()
                for items in connection._items(runs, commit)
            ]
            for broker, runs in by_broker.items()
        }
    assert found == expected


def test_a_damaged_run_is_refused() -> None:
    run = HalfRun("b", "T", 5, bytes(16), "A,B")
    assert HalfRun.from_json(run.to_json()) == run
    bad = run.to_json()
    bad[5] = "A"  # one id for two offsets
    with pytest.raises(ValueError, match="do not match"):
        HalfRun.from_json(bad)
