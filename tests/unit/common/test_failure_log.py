"""A run of failures is logged as two lines: the first failure and the recovery."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.failure_log import FailureEpisode


@given(st.lists(st.booleans(), max_size=60))
def test_one_traceback_per_run_of_failures_and_one_line_when_it_ends(outcomes: list[bool]) -> None:
    logger = logging.getLogger("test.failure_log")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        episode = FailureEpisode(logger, "writing x")
        for ok in outcomes:
            if ok:
                episode.succeeded()
                continue
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                episode.failed()
    finally:
        logger.removeHandler(handler)
    runs = sum(1 for i, ok in enumerate(outcomes) if not ok and (i == 0 or outcomes[i - 1]))
    ended = sum(1 for i, ok in enumerate(outcomes) if ok and i > 0 and not outcomes[i - 1])
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert len(errors) == runs and all(r.exc_info for r in errors)
    assert len([r for r in records if r.levelno == logging.WARNING]) == ended


def test_the_recovery_line_counts_the_failed_tries(caplog: pytest.LogCaptureFixture) -> None:
    episode = FailureEpisode(logging.getLogger("test.failure_log"), "writing x")
    for _ in range(3):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            episode.failed()
    episode.succeeded()
    assert [r.getMessage() for r in caplog.records] == [
        "writing x failed; retrying (logged again when it works)",
        "writing x works again after 3 failed tries",
    ]
