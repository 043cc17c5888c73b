"""The event loop behind the blocking API: one daemon thread per blocking
client object, running the same asyncio core the async API uses, so there
is no second copy of any client logic.

The loop is uvloop unless TIDEMQ_EVENT_LOOP=asyncio (tidemq.common.event_loop).
``run(coro)`` blocks the calling thread until the coroutine finishes on the
loop thread (re-raising its exception); ``submit(coro)`` returns a
``concurrent.futures.Future`` at once. Calling ``run`` from the loop thread
itself (for example from an asyncio listener) would deadlock, so it raises.

``BlockingClient`` is the one blocking wrapper: it builds an asyncio core on
its own LoopThread and forwards calls to it; ``Producer``, ``PushConsumer``
and ``LitePullConsumer`` only add their typed methods on top.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, ParamSpec, Protocol, Self, TypeVar

from tidemq.client.errors import ClientError
from tidemq.common import event_loop
from tidemq.protocol import ResponseCode

T = TypeVar("T")
P = ParamSpec("P")

_STOP_TIMEOUT_S = 10.0


class LoopThread:
    """An asyncio event loop running in its own daemon thread until ``stop()``.

    The loop is uvloop unless TIDEMQ_EVENT_LOOP=asyncio (tidemq.common.event_loop).
    """

    def __init__(self, name: str = "tidemq-client") -> None:
        self._loop = event_loop.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the loop; the returned future settles when it ends."""
        if self._stopped:
            coro.close()
            raise RuntimeError("this client's event loop has been stopped")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result in the calling thread."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(
                "a blocking client call was made from its own event loop thread; "
                "use the async API (tidemq.aio) inside async listeners"
            )
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        """Stop the loop (after the caller has shut the client down) and join the thread."""
        if self._stopped:
            return
        self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_loop_thread():
            self._thread.join(_STOP_TIMEOUT_S)


class AsyncCore(Protocol):
    """What BlockingClient needs of the asyncio client it drives."""

    @property
    def group(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


CoreT = TypeVar("CoreT", bound=AsyncCore)


class BlockingClient(Generic[CoreT]):
    """A blocking client: its asyncio core runs on a private LoopThread.

    The core is built on that loop (its locks, events and tasks belong there);
    ``shutdown()`` shuts the core down and stops the loop (idempotent), after
    which every call raises ClientError.
    """

    def __init__(self, build: Callable[[], CoreT], *, thread_name: str) -> None:
        self._loop = LoopThread(name=thread_name)
        self._stopped = False
        try:
            self._core: CoreT = self._loop.run(_construct(build))
        except BaseException:
            self._loop.stop()
            raise

    @property
    def core(self) -> CoreT:
        """The asyncio client this one drives (use it only on its loop)."""
        return self._core

    @property
    def group(self) -> str:
        return self._core.group

    @property
    def client_id(self) -> str:
        return self._core.client_id

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the core on the loop and wait for its result."""
        return self._loop.run(self._live(coro))

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start a coroutine of the core on the loop; its future settles when it ends."""
        return self._loop.submit(self._live(coro))

    def _call(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call a plain method of the core on the loop thread (the core is not thread-safe)."""
        return self._run(_call_on_loop(function, *args, **kwargs))

    def _live(self, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        if self._stopped:
            coro.close()
            raise ClientError(
                f"{type(self).__name__} {self._core.group} is shut down",
                ResponseCode.SYSTEM_ERROR,
            )
        return coro

    def start(self) -> None:
        self._run(self._core.start())

    def shutdown(self) -> None:
        """Shut the core down and stop the loop thread (idempotent)."""
        self._stop(self._core.shutdown())

    def _stop(self, shutdown: Coroutine[Any, Any, None]) -> None:
        if self._stopped:
            shutdown.close()
            return
        try:
            self._loop.run(shutdown)
        finally:
            self._stopped = True
            self._loop.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


async def _construct(build: Callable[[], T]) -> T:
    return build()


async def _call_on_loop(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return function(*args, **kwargs)
