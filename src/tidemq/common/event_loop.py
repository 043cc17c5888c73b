"""Which asyncio event loop tidemq runs: uvloop when it is installed, else asyncio's own.

Every loop tidemq creates comes from here: `tidemq serve` / `namesrv` /
`broker` and the admin commands (``run``), and the daemon thread behind the
blocking client API (``new_event_loop``). uvloop (libuv) makes each event-loop
pass, callback and socket operation cheaper; everything tidemq does with a
loop works on both (signal handlers, ``add_reader`` on the listening sockets,
``connect_accepted_socket``, ``run_in_executor``/``to_thread``, transports'
``pause_reading`` and write-buffer sizes, grpc.aio).

The environment variable ``TIDEMQ_EVENT_LOOP`` chooses, read each time a loop
is made:

- unset, empty or ``auto``: uvloop if it can be imported, else asyncio's loop;
- ``asyncio``: asyncio's own loop (the reference, and the fallback);
- ``uvloop``: uvloop, and an error if it is not installed.

uvloop's clock (``loop.time()``) ticks in milliseconds; asyncio's is finer.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["ENV_VAR", "configured_loop", "loop_name", "new_event_loop", "run"]

ENV_VAR = "TIDEMQ_EVENT_LOOP"
_CHOICES = ("auto", "asyncio", "uvloop")

T = TypeVar("T")


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def configured_loop() -> str:
    """The loop ``new_event_loop`` makes now: "uvloop" or "asyncio".

    Raises ValueError for an unknown TIDEMQ_EVENT_LOOP value and RuntimeError
    when it asks for uvloop and uvloop is not installed.
    """
    choice = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ValueError(
            f"{ENV_VAR}={os.environ.get(ENV_VAR)!r}: expected one of {', '.join(_CHOICES)}"
        )
    if choice == "asyncio":
        return "asyncio"
    if _uvloop_factory() is not None:
        return "uvloop"
    if choice == "uvloop":
        raise RuntimeError(f"{ENV_VAR}=uvloop, but uvloop is not installed")
    return "asyncio"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the configured kind (see the module docstring)."""
    if configured_loop() == "uvloop":
        factory = _uvloop_factory()
        assert factory is not None  # configured_loop checked the import
        return factory()
    # asyncio's own loop, even where the process installed another loop policy.
    if sys.platform == "win32":
        return asyncio.ProactorEventLoop()
    return asyncio.SelectorEventLoop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a loop of the configured kind."""
    try:
        configured_loop()  # a bad TIDEMQ_EVENT_LOOP fails here, before any loop exists
    except BaseException:
        coro.close()  # no "never awaited" warning
        raise
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """ "uvloop" or "asyncio" (or the class name of another loop) for ``loop``,
    by default the running one."""
    if loop is None:
        loop = asyncio.get_running_loop()
    module = type(loop).__module__
    if module.split(".")[0] == "uvloop":
        return "uvloop"
    if module.split(".")[0] == "asyncio":
        return "asyncio"
    return type(loop).__qualname__
