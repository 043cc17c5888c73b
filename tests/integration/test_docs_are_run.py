"""Every runnable code block under docs/ is run by a test (doc_examples.RUN_BY)."""

from __future__ import annotations

from pathlib import Path

from doc_examples import RUN_BY, RUNNABLE, languages

REPO = Path(__file__).resolve().parents[2]


def test_every_tagged_block_is_runnable_and_run() -> None:
    found = languages()
    assert set(found) >= set(RUN_BY), "RUN_BY names blocks that no longer exist"
    unknown = {key for key in found if key[1] not in RUNNABLE}
    assert not unknown, f"blocks no test can run (tag them as text, or run them): {unknown}"
    assert set(found) == set(RUN_BY), f"blocks no test runs: {set(found) - set(RUN_BY)}"
    for test in RUN_BY.values():
        assert (REPO / test).is_file(), test
