"""Waiting for a condition in tests: poll it with a deadline, never sleep blind.

``eventually(check, what)`` calls ``check`` (a plain function or an ``async
def``) until it returns something truthy and returns that; after ``timeout``
seconds it fails with an AssertionError naming ``what`` and the last value
seen, so a stuck test says what it was waiting for. Deadlines are generous
by default: the test machine is small and shared.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

__all__ = ["DEFAULT_TIMEOUT_S", "eventually", "unique_name"]

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
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
            shown = repr(value)
            if len(shown) > _REPR_LIMIT:
                shown = shown[:_REPR_LIMIT] + "..."
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what} (last: {shown})"
            )
        await asyncio.sleep(min(interval, max(0.0, deadline - loop.time())))


def unique_name(prefix: str) -> str:
    """`prefix` made unique within this test run (and across processes): a valid
    topic or group name, so tests sharing one server never meet each other's data."""
    return f"{prefix}{next(_names)}_{os.getpid() % 10_000}_{os.urandom(3).hex()}"
