"""tidemq.common.event_loop: uvloop by default, asyncio's loop on request."""

from __future__ import annotations

import asyncio

import pytest

from tidemq.client._loop import LoopThread
from tidemq.common import event_loop

uvloop = pytest.importorskip("uvloop")


@pytest.fixture(autouse=True)
def default_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.ENV_VAR, raising=False)


@pytest.mark.parametrize("value", ["", "auto", " AUTO ", "uvloop", "UVLoop"])
def test_uvloop_unless_asked_otherwise(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, value)
    assert event_loop.configured_loop() == "uvloop"
    loop = event_loop.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
        assert event_loop.loop_name(loop) == "uvloop"
    finally:
        loop.close()


def test_asyncio_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, "asyncio")
    assert event_loop.configured_loop() == "asyncio"
    loop = event_loop.new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert event_loop.loop_name(loop) == "asyncio"
    finally:
        loop.close()


def test_an_unknown_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, "trio")
    with pytest.raises(ValueError, match="TIDEMQ_EVENT_LOOP='trio'"):
        event_loop.configured_loop()

    async def never_started() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ValueError):
        event_loop.run(never_started())  # closed, so no "never awaited" warning


def test_without_uvloop_auto_falls_back_and_uvloop_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_loop, "_uvloop_factory", lambda: None)
    assert event_loop.configured_loop() == "asyncio"
    monkeypatch.setenv(event_loop.ENV_VAR, "uvloop")
    with pytest.raises(RuntimeError, match="not installed"):
        event_loop.configured_loop()


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_run_runs_on_the_configured_loop(monkeypatch: pytest.MonkeyPatch, choice: str) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, choice)

    async def which() -> str:
        await asyncio.sleep(0)
        return event_loop.loop_name()

    assert event_loop.run(which()) == choice


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_the_blocking_client_loop_thread_uses_it(
    monkeypatch: pytest.MonkeyPatch, choice: str
) -> None:
    monkeypatch.setenv(event_loop.ENV_VAR, choice)
    thread = LoopThread()
    try:
        assert event_loop.loop_name(thread.loop) == choice

        async def in_thread() -> str:
            return await asyncio.to_thread(lambda: "executor ok")

        assert thread.run(in_thread(), timeout=10) == "executor ok"
    finally:
        thread.stop()
