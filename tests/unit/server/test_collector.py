"""The server's garbage-collector settings (tidemq.server.collector)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tidemq.server.collector import SERVER_THRESHOLDS, collector_choice, settle_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_settling_freezes_the_startup_heap_and_raises_the_thresholds(
    restored_collector: None,
) -> None:
    assert settle_collector({}) is True
    assert gc.get_threshold() == SERVER_THRESHOLDS
    assert gc.get_freeze_count() > 1000  # modules, classes, functions alive now


def test_default_keeps_pythons_settings(restored_collector: None) -> None:
    before = gc.get_threshold()
    assert settle_collector({"TIDEMQ_GC": "default"}) is False
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("value", ["fast", "", "0"])
def test_an_unknown_choice_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValueError, match="TIDEMQ_GC"):
        collector_choice({"TIDEMQ_GC": value})


def test_choice_defaults_to_the_server_settings() -> None:
    assert collector_choice({}) == "server"
    assert collector_choice({"TIDEMQ_GC": " Default "}) == "default"
