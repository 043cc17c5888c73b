"""The pure decisions of transactional messages: due, discard, op bodies, the ledger."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.transaction_policy import (
    ResolvedLedger,
    Verdict,
    check_times,
    decide,
    end_mismatch,
    immunity_ms,
    op_body,
    parse_op_body,
)

NOW = 1_700_000_000_000


def verdict(
    times: int = 0,
    age_ms: int = 0,
    *,
    born_ahead_ms: int = 0,
    immunity: str | None = None,
    timeout_ms: int = 6000,
    check_max: int = 15,
) -> Verdict:
    stored = NOW - age_ms
    return decide(
        NOW,
        times_checked=times,
        born_ms=stored + born_ahead_ms,
        stored_ms=stored,
        timeout_ms=timeout_ms,
        immunity_raw=immunity,
        check_max=check_max,
    )


def test_a_half_younger_than_the_timeout_waits_and_an_older_one_is_checked() -> None:
    assert verdict(age_ms=5999) is Verdict.WAIT
    assert verdict(age_ms=6000) is Verdict.CHECK


def test_a_producer_clock_ahead_does_not_postpone_the_first_check() -> None:
    assert verdict(age_ms=7000, born_ahead_ms=60_000) is Verdict.CHECK


def test_a_producer_clock_behind_counts_from_the_born_time() -> None:
    assert verdict(age_ms=1000, born_ahead_ms=-5000) is Verdict.CHECK


def test_a_copy_checked_before_is_checked_on_the_next_scan() -> None:
    assert verdict(times=1, age_ms=0) is Verdict.CHECK
    assert verdict(times=14, age_ms=0) is Verdict.CHECK


def test_a_half_checked_the_maximum_times_is_discarded() -> None:
    assert verdict(times=15) is Verdict.DISCARD
    assert verdict(times=3, check_max=3) is Verdict.DISCARD


def test_inside_its_own_immunity_a_half_is_requeued_not_checked() -> None:
    assert verdict(age_ms=3000, immunity="60") is Verdict.WAIT
    assert verdict(age_ms=7000, immunity="60") is Verdict.REQUEUE
    assert verdict(age_ms=60_000, immunity="60") is Verdict.CHECK


def test_immunity_is_never_below_the_timeout_and_ignores_garbage() -> None:
    assert immunity_ms("1", 6000) == 6000
    assert immunity_ms("10", 6000) == 10_000
    assert immunity_ms("ten", 6000) == 6000
    assert immunity_ms(None, 6000) == 6000


@given(
    times=st.integers(0, 40),
    age=st.integers(-10_000, 10**8),
    timeout=st.integers(1, 10**6),
    check_max=st.integers(1, 30),
)
def test_decide_is_total_and_bounded(times: int, age: int, timeout: int, check_max: int) -> None:
    result = verdict(times, age, timeout_ms=timeout, check_max=check_max)
    if times >= check_max:
        assert result is Verdict.DISCARD
    elif times > 0:
        assert result is Verdict.CHECK
    elif age < timeout:
        assert result is Verdict.WAIT
    else:
        assert result is Verdict.CHECK


def test_check_times_reads_the_property_leniently() -> None:
    assert check_times(None) == 0
    assert check_times("3") == 3
    assert check_times("-2") == 0
    assert check_times("x") == 0


def test_op_body_is_the_half_queue_offset_in_decimal() -> None:
    assert op_body(0) == b"0"
    assert op_body(1234) == b"1234"


@given(st.lists(st.integers(0, 2**62), min_size=1, max_size=5))
def test_op_bodies_round_trip_also_the_merged_5x_form(offsets: list[int]) -> None:
    assert parse_op_body(op_body(offsets[0])) == offsets[:1]
    merged = b",".join(op_body(offset) for offset in offsets)
    assert parse_op_body(merged) == offsets


def test_an_unreadable_op_body_names_nothing() -> None:
    assert parse_op_body(b"") == []
    assert parse_op_body(b"\xff\xfe") == []
    assert parse_op_body(b"12,x,-3") == [12]


def test_end_mismatch_uses_javas_remarks_in_javas_order() -> None:
    good = {
        "half_group": "PG",
        "half_queue_offset": 4,
        "half_commit_log_offset": 900,
        "producer_group": "PG",
        "tran_state_table_offset": 4,
        "commit_log_offset": 900,
    }
    assert end_mismatch(**good) is None  # type: ignore[arg-type]
    assert end_mismatch(**{**good, "producer_group": "other", "tran_state_table_offset": 5}) == (  # type: ignore[arg-type]
        "The producer group wrong"
    )
    assert end_mismatch(**{**good, "half_group": None}) == "The producer group wrong"  # type: ignore[arg-type]
    assert end_mismatch(**{**good, "tran_state_table_offset": 5}) == (  # type: ignore[arg-type]
        "The transaction state table offset wrong"
    )
    assert end_mismatch(**{**good, "commit_log_offset": 901}) == "The commit log offset wrong"  # type: ignore[arg-type]


def test_the_ledger_keeps_a_key_until_the_scan_passed_and_the_grace_ended() -> None:
    ledger = ResolvedLedger(grace_ms=1000)
    ledger.add("K1", op_offset=0, horizon=10, resolved_ms=NOW)
    ledger.add("K2", op_offset=1, horizon=12, resolved_ms=NOW + 500)
    assert "K1" in ledger and "K2" in ledger
    ledger.prune(scan_progress=9, now_ms=NOW + 5000)
    assert "K1" in ledger, "the scan has not passed its horizon"
    ledger.prune(scan_progress=10, now_ms=NOW + 999)
    assert "K1" in ledger, "inside the grace period"
    ledger.prune(scan_progress=10, now_ms=NOW + 1000)
    assert "K1" not in ledger and "K2" in ledger
    assert ledger.first_op_offset(default=7) == 1
    ledger.prune(scan_progress=12, now_ms=NOW + 1500)
    assert len(ledger) == 0
    assert ledger.first_op_offset(default=7) == 7


def test_a_key_resolved_twice_stays_until_its_latest_entry_goes() -> None:
    ledger = ResolvedLedger(grace_ms=0)
    ledger.add("K", op_offset=0, horizon=1, resolved_ms=NOW)
    ledger.add("K", op_offset=1, horizon=5, resolved_ms=NOW)
    ledger.prune(scan_progress=3, now_ms=NOW)
    assert "K" in ledger
    ledger.prune(scan_progress=5, now_ms=NOW)
    assert "K" not in ledger
