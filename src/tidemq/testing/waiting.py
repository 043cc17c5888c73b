"""Waiting for a condition in tests: poll it with a deadline, never sleep blind.

``eventually(check, what)`` calls ``check`` (a plain function or an ``async
def``) until it returns something truthy and returns that; after ``timeout``
seconds it fails with an AssertionError naming ``what`` and the last value
seen, so a stuck test says what it was waiting for. ``wait_until`` is its
twin for code without an event loop (a test driving a server in another
thread or process through a blocking client). Deadlines are generous by
default: the test machine is small and shared, so a deadline is a hang guard,
never a claim about speed.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

__all__ = ["DEFAULT_TIMEOUT_S", "HANG_GUARD_S", "eventually", "unique_name", "wait_until"]

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
HANG_GUARD_S = DEFAULT_TIMEOUT_S
"""A deadline around something that must end on its own (`asyncio.timeout(HANG_GUARD_S)`):
it fails a hang, it is no claim about speed."""
DEFAULT_INTERVAL_S = 0.05
_REPR_LIMIT = 200

_names = itertools.count()


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> T: ...


async def eventually(
    check: Callable[[], object],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> object:
    """Poll `check` until it returns something truthy and return that value.

    AssertionError after `timeout` seconds; the check runs at least once and
    once more at the deadline, so a slow poll does not cost a last chance.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise _timed_out(timeout, what, value)
        await asyncio.sleep(min(interval, max(0.0, deadline - loop.time())))


def wait_until(
    check: Callable[[], T | None],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
) -> T:
    """`eventually` for code without an event loop: poll the plain function
    `check` until it returns something truthy and return that value.

    AssertionError after `timeout` seconds (the check runs at least once and
    once more at the deadline). Calling it from a coroutine is a RuntimeError:
    it would block the loop that has to make the condition come true.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("wait_until blocks: in a coroutine, await eventually() instead")
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, value)
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def _timed_out(timeout: float, what: str, last: object) -> AssertionError:
    shown = repr(last)
    if len(shown) > _REPR_LIMIT:
        shown = shown[:_REPR_LIMIT] + "..."
    return AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {shown})")


def unique_name(prefix: str) -> str:
    """`prefix` made unique within this test run (and across processes): a valid
    topic or group name, so tests sharing one server never meet each other's data."""
    return f"{prefix}{next(_names)}_{os.getpid() % 10_000}_{os.urandom(3).hex()}"
