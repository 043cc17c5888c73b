"""LoopThread: the blocking API's event loop in a thread; BlockingClient over it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tidemq.client._loop import BlockingClient, LoopThread
from tidemq.client.errors import ClientError
from tidemq.protocol import ResponseCode


def test_run_returns_the_result_from_the_loop_thread() -> None:
    loop = LoopThread()
    try:
        caller = threading.get_ident()

        async def where() -> int:
            await asyncio.sleep(0)
            return threading.get_ident()

        assert loop.run(where()) != caller
    finally:
        loop.stop()


def test_run_re_raises_the_coroutine_exception() -> None:
    loop = LoopThread()
    try:

        async def boom() -> None:
            raise ValueError("bad input")

        with pytest.raises(ValueError, match="bad input"):
            loop.run(boom())
    finally:
        loop.stop()


def test_submit_returns_a_future_at_once() -> None:
    loop = LoopThread()
    try:
        release = threading.Event()

        async def wait_for_release() -> str:
            await asyncio.get_running_loop().run_in_executor(None, release.wait)
            return "done"

        future = loop.submit(wait_for_release())
        assert not future.done()
        release.set()
        assert future.result(timeout=10) == "done"
    finally:
        loop.stop()


def test_run_from_the_loop_thread_is_refused_instead_of_deadlocking() -> None:
    loop = LoopThread()
    try:

        async def nested() -> None:
            async def inner() -> None:
                return None

            loop.run(inner())

        with pytest.raises(RuntimeError, match="own event loop thread"):
            loop.run(nested())
    finally:
        loop.stop()


def test_submit_after_stop_is_refused() -> None:
    loop = LoopThread()
    loop.stop()

    async def anything() -> None:
        return None

    with pytest.raises(RuntimeError, match="stopped"):
        loop.submit(anything())


class FakeCore:
    """An asyncio core recording where and how it was driven."""

    def __init__(self, group: str, *, fail: bool = False) -> None:
        if fail:
            raise ValueError("bad settings")
        self.group = group
        self.client_id = f"ip@{group}"
        self.built_in = threading.get_ident()
        self.calls: list[str] = []
        self.loop = asyncio.get_running_loop()

    async def start(self) -> None:
        self.calls.append("start")

    async def shutdown(self) -> None:
        self.calls.append("shutdown")

    def remember(self, word: str, *, twice: bool = False) -> int:
        self.calls.extend([word] * (2 if twice else 1))
        return threading.get_ident()


class Blocking(BlockingClient[FakeCore]):
    def __init__(self, group: str, *, fail: bool = False) -> None:
        super().__init__(lambda: FakeCore(group, fail=fail), thread_name=f"test-{group}")

    def remember(self, word: str, *, twice: bool = False) -> int:
        return self._call(self.core.remember, word, twice=twice)


def test_blocking_client_builds_and_drives_its_core_on_the_loop_thread() -> None:
    with Blocking("G1") as client:
        core = client.core
        assert core.built_in != threading.get_ident()
        assert client.group == "G1" and client.client_id == "ip@G1"
        assert client.remember("hi", twice=True) == core.built_in
        assert core.calls == ["start", "hi", "hi"]
    assert core.calls == ["start", "hi", "hi", "shutdown"]
    assert core.loop.is_closed()


def test_blocking_client_shutdown_is_idempotent_and_later_calls_are_refused() -> None:
    client = Blocking("G2")
    client.start()
    client.shutdown()
    client.shutdown()
    assert client.core.calls == ["start", "shutdown"]
    with pytest.raises(ClientError, match="Blocking G2 is shut down") as error:
        client.remember("late")
    assert error.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(ClientError, match="shut down"):
        client.start()


def test_blocking_client_that_cannot_build_its_core_stops_its_loop_thread() -> None:
    before = {thread.name for thread in threading.enumerate()}
    with pytest.raises(ValueError, match="bad settings"):
        Blocking("G3", fail=True)
    assert "test-G3" not in {thread.name for thread in threading.enumerate()} - before
