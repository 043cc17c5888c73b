"""Held pulls (RocketMQ's PullRequestHoldService), per (topic, queue id).

A pull that finds nothing new at its offset and carries the SUSPEND flag is
parked here instead of being answered. It is woken:

- at once when the store dispatches a message for its queue at or past its
  offset whose tag code its filter accepts (`notify_arrival`, called from
  the store's arrival listener);
- by the periodic re-check (`recheck`, every 5 s) if the queue's max offset
  moved past its offset, whatever the filter says (as Java's hold service
  does: the re-run pull then answers PULL_RETRY_IMMEDIATELY and moves the
  consumer on);
- at its suspend timeout (`wait` uses the event loop timer, so the answer
  comes on time; `expire` is a safety net driven by the injected clock);
- on shutdown (`wake_all`).

The woken handler runs the pull again (without suspending) and answers with
whatever it finds. The number of held pulls is bounded: past `max_held` a
pull is not parked (`hold` returns None) and the caller answers at once.
Use from the event loop thread only.

With long polling switched off (BrokerConfig `long_polling_enable=False`,
RocketMQ's `longPollingEnable`) a pull is still held, but for
`short_polling_time_ms` (1 s) whatever the client asked (`hold_time_s`),
arrivals wake nobody (`wake_on_arrival=False`: Java's store then calls no
arrival listener), and the re-check runs every `short_polling_time_ms`
instead of every 5 s (`recheck_interval_s`), as Java's PullRequestHoldService.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

DEFAULT_MAX_HELD = 10_000
DEFAULT_MAX_SUSPEND_S = 60.0
"""Longest hold whatever the client asks (ali-ons asks 15 s, times out at 30 s)."""


def hold_time_s(
    *,
    suspend_flag: bool,
    client_suspend_ms: int,
    long_polling_enable: bool,
    short_polling_time_ms: int,
) -> float | None:
    """How long to hold a pull that found nothing new; None answers it at once.

    Java (DefaultPullMessageResultHandler, PULL_NOT_FOUND) holds only pulls
    carrying the SUSPEND flag: for the client's suspend timeout, or for
    shortPollingTimeMills when long polling is off. A zero timeout with long
    polling on is answered at once here (Java parks it until the next check).
    """
    if not suspend_flag:
        return None
    if not long_polling_enable:
        return max(short_polling_time_ms, 0) / 1000
    if client_suspend_ms <= 0:
        return None
    return client_suspend_ms / 1000


def recheck_interval_s(
    *, long_polling_enable: bool, long_polling_check_interval_s: float, short_polling_time_ms: int
) -> float:
    """How often held pulls are re-checked (Java PullRequestHoldService.run:
    every 5 s, every shortPollingTimeMills with long polling off)."""
    if long_polling_enable:
        return long_polling_check_interval_s
    return short_polling_time_ms / 1000


class Wake(enum.Enum):
    ARRIVED = "arrived"
    RECHECK = "recheck"
    TIMEOUT = "timeout"
    SHUTDOWN = "shutdown"


QueueKey = tuple[str, int]


@dataclass(eq=False, slots=True)
class HeldPull:
    topic: str
    queue_id: int
    offset: int
    deadline: float
    """On the injected clock's monotonic scale."""
    timeout_s: float
    matches: Callable[[int], bool] | None
    """Tag-code filter; None accepts every arrival."""
    future: asyncio.Future[Wake] = field(repr=False)

    def wake(self, reason: Wake) -> bool:
        if self.future.done():
            return False
        self.future.set_result(reason)
        return True


class LongPollingService:
    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        max_held: int = DEFAULT_MAX_HELD,
        max_suspend_s: float = DEFAULT_MAX_SUSPEND_S,
        wake_on_arrival: bool = True,
    ) -> None:
        self.clock = clock
        self.max_held = max_held
        self.max_suspend_s = max_suspend_s
        self.wake_on_arrival = wake_on_arrival
        """False with long polling off: only the re-check and the timeout answer."""
        self._held: dict[QueueKey, list[HeldPull]] = {}
        self._count = 0
        self._closed = False

    @property
    def held_count(self) -> int:
        return self._count

    def held_for(self, topic: str, queue_id: int) -> int:
        return len(self._held.get((topic, queue_id), ()))

    def hold(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        matches: Callable[[int], bool] | None = None,
    ) -> HeldPull | None:
        """Park a pull; None when the service is full or shut down."""
        if self._closed or self._count >= self.max_held:
            return None
        timeout_s = min(max(timeout_s, 0.0), self.max_suspend_s)
        loop = asyncio.get_running_loop()
        held = HeldPull(
            topic,
            queue_id,
            offset,
            self.clock.monotonic() + timeout_s,
            timeout_s,
            matches,
            loop.create_future(),
        )
        self._held.setdefault((topic, queue_id), []).append(held)
        self._count += 1
        return held

    async def wait(self, held: HeldPull) -> Wake:
        """Until `held` is woken or its timeout passes; always un-parks it."""
        try:
            async with asyncio.timeout(held.timeout_s):
                return await held.future
        except TimeoutError:
            return Wake.TIMEOUT
        finally:
            self._remove(held)

    def _remove(self, held: HeldPull) -> None:
        key = (held.topic, held.queue_id)
        waiting = self._held.get(key)
        if waiting is None:
            return
        try:
            waiting.remove(held)
        except ValueError:
            return
        self._count -= 1
        if not waiting:
            del self._held[key]

    def notify_arrival(self, topic: str, queue_id: int, queue_offset: int, tags_code: int) -> int:
        """A message was stored at `queue_offset`: wake the pulls it satisfies."""
        waiting = self._held.get((topic, queue_id))
        if not waiting or not self.wake_on_arrival:
            return 0
        woken = 0
        for held in waiting:
            if held.offset <= queue_offset and (held.matches is None or held.matches(tags_code)):
                woken += held.wake(Wake.ARRIVED)
        return woken

    def recheck(self, max_offset_of: Callable[[str, int], int]) -> int:
        """Wake pulls whose queue has grown past their offset; expire late ones."""
        woken = self.expire()
        for (topic, queue_id), waiting in list(self._held.items()):
            max_offset = max_offset_of(topic, queue_id)
            for held in waiting:
                if max_offset > held.offset:
                    woken += held.wake(Wake.RECHECK)
        return woken

    def expire(self) -> int:
        """Answer pulls whose deadline passed on the injected clock."""
        now = self.clock.monotonic()
        woken = 0
        for waiting in list(self._held.values()):
            for held in waiting:
                if held.deadline <= now:
                    woken += held.wake(Wake.TIMEOUT)
        return woken

    def wake_all(self) -> int:
        """Shutdown: answer every held pull now and park no more."""
        self._closed = True
        woken = 0
        for waiting in list(self._held.values()):
            for held in waiting:
                woken += held.wake(Wake.SHUTDOWN)
        return woken
