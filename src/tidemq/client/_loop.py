"""The event loop behind the blocking API: one daemon thread per blocking
client object, running the same asyncio core the async API uses, so there
is no second copy of any client logic.

``run(coro)`` blocks the calling thread until the coroutine finishes on the
loop thread (re-raising its exception); ``submit(coro)`` returns a
``concurrent.futures.Future`` at once. Calling ``run`` from the loop thread
itself (for example from an asyncio listener) would deadlock, so it raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_STOP_TIMEOUT_S = 10.0


class LoopThread:
    """An asyncio event loop running in its own daemon thread until ``stop()``."""

    def __init__(self, name: str = "tidemq-client") -> None:
        self._loop = asyncio.new_event_loop()
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
