"""Keeping a push consumer's messages invisible while it works on them.

The official 5.x PushConsumers receive with ``auto_renew`` and no invisible time
of their own: the RocketMQ proxy gives each message its default invisible time
(60 s) and then renews it for as long as the client holds the message
(proxy/.../service/receipt/DefaultReceiptHandleManager.java, ProxyConfig
defaults). Without that, a listener that runs past 60 s sees its message
delivered again to another consumer, and its late ack is refused.

What the proxy does, and this module with it:

- every ``period_ms`` (renewSchedulePeriodMillis, 5 s) each held message whose
  invisible time ends within ``ahead_ms`` (renewAheadTimeMillis, 10 s) is made
  invisible again for 1, 3, 5, 10, 30 minutes, then every hour
  (RenewStrategyPolicy), under a new receipt handle;
- a renewal that fails for a reason other than a bad handle is tried again
  at the next scan, up to ``MAX_RENEW_FAILURES`` (maxRenewRetryTimes) in a row;
- after ``max_ms`` (renewMaxTimeMillis, 3 h) renewing stops: the message is
  handed back with the group's next retry delay, as a nack would;
- the client's ack, nack (ChangeInvisibleDuration) or forward to the DLQ names
  the handle it received; ``take`` swaps in the current one and ends the
  renewals of that message;
- a client gone (its Telemetry stream closed) has its messages made visible
  again in ``CLEAR_INVISIBLE_MS`` (invisibleTimeMillisWhenClear, 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tidemq.broker.pop.api import ReceiptHandleError
from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.broker.requests import BrokerError
from tidemq.common.clock import Clock
from tidemq.common.tasks import TaskSet
from tidemq.grpc.telemetry import RETRY_BACKOFF_S

__all__ = [
    "CLEAR_INVISIBLE_MS",
    "MAX_RENEW_FAILURES",
    "RENEW_DURATIONS_MS",
    "HeldMessage",
    "ReceiptRenewals",
    "RenewalSettings",
    "Step",
    "give_back_delay_ms",
    "next_step",
]

log = logging.getLogger(__name__)

RENEW_DURATIONS_MS: tuple[int, ...] = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
"""RenewStrategyPolicy: the invisible time of the n-th renewal, the last repeating."""
MAX_RENEW_FAILURES = 3
"""ProxyConfig.maxRenewRetryTimes."""
CLEAR_INVISIBLE_MS = 1_000
"""ProxyConfig.invisibleTimeMillisWhenClear: a gone client's messages come back this soon."""

ChangeInvisible = Callable[[str, str, str, int], Awaitable[str]]
"""(group, topic, receipt handle, invisible ms) -> the new handle (pop's change_invisible)."""
ClientOnline = Callable[[str], bool]
"""client id -> whether its Telemetry stream is open."""


@dataclass(frozen=True, slots=True)
class RenewalSettings:
    enabled: bool = True
    """ProxyConfig.enableProxyAutoRenew."""
    default_invisible_ms: int = 60_000
    """ProxyConfig.defaultInvisibleTimeMills: an auto-renew receive's invisible time."""
    ahead_ms: int = 10_000
    period_ms: int = 5_000
    max_ms: int = 3 * 3_600_000

    def __post_init__(self) -> None:
        for name in ("default_invisible_ms", "ahead_ms", "period_ms", "max_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass(slots=True)
class HeldMessage:
    """A message a client received with auto_renew and has not settled yet."""

    group: str
    topic: str
    received: str
    """The handle the client was given (and will name)."""
    current: str
    """The handle that works now (a renewal replaces it)."""
    received_ms: int
    attempt: int
    """Its delivery attempt (1 = first)."""
    renewals: int = 0
    failures: int = 0
    renewing: asyncio.Future[None] | None = None
    """Set while a renewal is in flight: a settle waits for its new handle."""

    @property
    def due_ms(self) -> int:
        return parse_receipt_handle(self.current).due_ms


class Step(enum.Enum):
    WAIT = "wait"
    RENEW = "renew"
    GIVE_BACK = "give back"
    DROP = "drop"


def next_step(held: HeldMessage, now_ms: int, settings: RenewalSettings) -> tuple[Step, int]:
    """What a scan does with `held` at `now_ms`, and the invisible time it asks for."""
    if held.failures >= MAX_RENEW_FAILURES:
        return Step.DROP, 0
    if held.due_ms - now_ms > settings.ahead_ms:
        return Step.WAIT, 0
    if now_ms - held.received_ms >= settings.max_ms:
        return Step.GIVE_BACK, 0
    index = min(held.renewals, len(RENEW_DURATIONS_MS) - 1)
    return Step.RENEW, RENEW_DURATIONS_MS[index]


def give_back_delay_ms(attempt: int) -> int:
    """The retry delay of a message on its `attempt`-th delivery when renewing stops
    (CustomizedRetryPolicy.nextDelayDuration(reconsumeTimes): index reconsumeTimes + 2)."""
    index = min(max(attempt - 1, 0) + 2, len(RETRY_BACKOFF_S) - 1)
    return RETRY_BACKOFF_S[index] * 1000


class ReceiptRenewals:
    """The held messages of every (client, group), and the task that renews them."""

    def __init__(
        self,
        settings: RenewalSettings,
        clock: Clock,
        change_invisible: ChangeInvisible,
        client_online: ClientOnline,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._change_invisible = change_invisible
        self._client_online = client_online
        self._held: dict[tuple[str, str], dict[str, HeldMessage]] = {}
        self._tasks = TaskSet("grpc-renewals")
        self._running = False
        self.renewed = 0
        self.given_back = 0
        self.cleared = 0

    def __len__(self) -> int:
        return sum(len(messages) for messages in self._held.values())

    def hold(
        self, client_id: str, group: str, topic: str, message_id: str, handle: str, attempt: int
    ) -> None:
        """Renew `message_id` for `client_id` until it is settled (starts the task)."""
        held = HeldMessage(group, topic, handle, handle, self.clock.now_ms(), attempt)
        self._held.setdefault((client_id, group), {})[message_id] = held
        if not self._running:
            self._running = True
            self._tasks.spawn(self._run())

    async def take(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """The handle to settle with: the current one if `handle` is what the client
        was given for a held message (renewals end; one in flight is waited for),
        else `handle` as it is."""
        messages = self._held.get((client_id, group))
        held = messages.get(message_id) if messages is not None else None
        if messages is None or held is None or held.received != handle:
            return handle
        del messages[message_id]
        if not messages:
            del self._held[(client_id, group)]
        if held.renewing is not None:
            await asyncio.shield(held.renewing)
        return held.current

    async def scan(self) -> None:
        """One pass: clear the messages of clients gone, renew those due soon."""
        for key in list(self._held):
            client_id, _group = key
            if not self._client_online(client_id):
                await self._clear(key)
                continue
            for message_id, held in list(self._held.get(key, {}).items()):
                await self._step(key, message_id, held)

    async def close(self) -> None:
        """Stop renewing; every held message comes back soon (the server stops)."""
        await self._tasks.cancel_all()
        self._running = False
        for key in list(self._held):
            await self._clear(key)

    async def _run(self) -> None:
        """Scan every period while anything is held (ends, and `hold` starts it again)."""
        try:
            while self._held:
                await asyncio.sleep(self.settings.period_ms / 1000)
                try:
                    await self.scan()
                except Exception:
                    log.exception("renewing received messages failed")
        finally:
            self._running = False

    async def _step(self, key: tuple[str, str], message_id: str, held: HeldMessage) -> None:
        step, invisible_ms = next_step(held, self.clock.now_ms(), self.settings)
        if step is Step.WAIT:
            return
        if step is Step.DROP:
            log.warning("gave up renewing message %s of group %s", message_id, held.group)
            self._forget(key, message_id, held)
            return
        if step is Step.GIVE_BACK:
            delay = give_back_delay_ms(held.attempt)
            with contextlib.suppress(BrokerError):
                await self._change_invisible(held.group, held.topic, held.current, delay)
            self.given_back += 1
            self._forget(key, message_id, held)
            return
        held.renewing = asyncio.get_running_loop().create_future()
        try:
            held.current = await self._change_invisible(
                held.group, held.topic, held.current, invisible_ms
            )
        except ReceiptHandleError:
            self._forget(key, message_id, held)  # acked, or gone: nothing to renew
            return
        except BrokerError as exc:
            held.failures += 1
            log.info("renewing message %s failed (%d): %s", message_id, held.failures, exc)
            return
        finally:
            held.renewing.set_result(None)
            held.renewing = None
        held.renewals += 1
        held.failures = 0
        self.renewed += 1

    async def _clear(self, key: tuple[str, str]) -> None:
        for held in self._held.pop(key, {}).values():
            try:
                await self._change_invisible(
                    held.group, held.topic, held.current, CLEAR_INVISIBLE_MS
                )
            except Exception as exc:  # the store may be closing: it comes back when due
                log.info("handing back a held message of group %s failed: %s", held.group, exc)
            self.cleared += 1

    def _forget(self, key: tuple[str, str], message_id: str, held: HeldMessage) -> None:
        messages = self._held.get(key)
        if messages is not None and messages.get(message_id) is held:
            del messages[message_id]
            if not messages:
                del self._held[key]
