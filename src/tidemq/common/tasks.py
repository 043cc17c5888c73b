"""An owned set of tasks: every task a server, client or consumer starts is kept until it ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger("tidemq.tasks")

_FIRST_WAIT_S = 1.0
_RECANCEL_S = 0.1


class TaskSet:
    """Tasks started by one owner (a server or a client), cancelled and awaited on shutdown."""

    __slots__ = ("_name", "_tasks")

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every task (also ones started meanwhile) to end."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return True

    async def cancel_all(self, timeout: float = 5.0) -> None:
        """Cancel every task and wait for them; a task that refuses to end is logged.

        Tasks get `_FIRST_WAIT_S` to finish their clean-up; those still running
        are then cancelled again every `_RECANCEL_S`: on Python 3.11
        `asyncio.wait_for` can swallow a cancellation that races with its inner
        future finishing, and one lost cancel must not cost the whole timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        first = True
        while self._tasks:
            tasks = set(self._tasks)
            for task in tasks:
                task.cancel()
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            pause = _FIRST_WAIT_S if first else _RECANCEL_S
            first = False
            await asyncio.wait(tasks, timeout=min(remaining, pause))
        if self._tasks:
            logger.error(
                "%s: %d task(s) did not end after cancellation", self._name, len(self._tasks)
            )
