"""LoopThread: the blocking API's event loop in a thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tidemq.client._loop import LoopThread


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
