"""Timer messages on a broker: parking at send, recall, the timer service.

`BrokerTimers` is the broker's `hooks.TimerHooks`: the rules of RocketMQ 5's
`HookUtils.transformTimerMessage` and `RecallMessageProcessor` (codes and
remarks as Java) in front of `tidemq.timer.TimerService`, which stores and
delivers. One deliberate difference: recalling a message already delivered
is refused (ILLEGAL_OPERATION) where Java answers success.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemq.broker.config import BrokerConfig
from tidemq.broker.requests import BrokerError
from tidemq.broker.stats import DELAY, BrokerStats
from tidemq.broker.timer_progress import MASTER_PROGRESS_FILE, load_master_progress
from tidemq.common import properties as props
from tidemq.common.clock import Clock
from tidemq.common.recall_handle import RecallHandle, RecallHandleError
from tidemq.protocol.codes import ResponseCode
from tidemq.store.api import BatchPutResult, MessageStore, MessageToStore
from tidemq.timer.parking import TimerPropertyError, park, requested_deliver_ms
from tidemq.timer.service import InheritedProgress, RecallOutcome, TimerService, TimerSettings

TIMER_DIRECTORY = "timer"
"""Under the store directory: timer log, timer files, checkpoint."""


class BrokerTimers:
    """TimerHooks over one store (see the module docstring)."""

    def __init__(
        self, config: BrokerConfig, store: MessageStore, clock: Clock, stats: BrokerStats
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.stats = stats
        """Delivered timer messages count as puts of their topic."""
        copied = load_master_progress(config.config_dir / MASTER_PROGRESS_FILE)
        self.engine = TimerService(
            store,
            config.store_dir / TIMER_DIRECTORY,
            clock,
            self._put_many,
            TimerSettings(precision_ms=config.timer_precision_ms),
            inherited=None
            if copied is None
            else InheritedProgress(copied.master_timer_queue_offset, copied.last_read_time_ms),
        )
        store.add_arrival_listener(self.engine.on_arrival)
        self.enqueued: dict[str, int] = {}
        """Real topic -> timer messages parked since start (rocketmq_timer_enqueue_total)."""
        self.dequeued: dict[str, int] = {}
        """Real topic -> timer messages delivered since start (rocketmq_timer_dequeue_total)."""

    @property
    def max_delay_ms(self) -> int:
        return self.config.timer_max_delay_s * 1000

    async def _put_many(self, messages: Sequence[MessageToStore]) -> BatchPutResult:
        result = await self.store.put_messages(messages)
        if result.results:
            for message in messages:
                self.stats.record_put(message.topic, 1, len(message.body), DELAY)
                self.dequeued[message.topic] = self.dequeued.get(message.topic, 0) + 1
        return result

    # -- parking -----------------------------------------------------------------

    def park(self, message: MessageToStore) -> tuple[MessageToStore, int] | None:
        properties = props.decode_properties(message.properties)
        now = self.clock.now_ms()
        try:
            deliver_ms = requested_deliver_ms(properties, now)
        except TimerPropertyError as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL, f"timer message illegal: {exc}"
            ) from None
        if deliver_ms is None:
            return None
        if not self.config.timer_enable:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        if props.TIMER_DEL_UNIQKEY in properties:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal: TIMER_DEL_UNIQKEY is set by the broker's recall, "
                "not by a producer",
            )
        if deliver_ms <= now:
            return None  # due already: stored as a normal message, delivered at once
        if deliver_ms - now > self.max_delay_ms:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal, the delay time should not be bigger than the max delay "
                f"{self.max_delay_ms}ms; the message asked for {deliver_ms - now}ms",
            )
        return park(message, deliver_ms), deliver_ms

    def parked_stored(self, topic: str) -> None:
        """A timer message of `topic` a producer sent was stored (parked)."""
        self.enqueued[topic] = self.enqueued.get(topic, 0) + 1

    def recall_handle(self, topic: str, message: MessageToStore, deliver_ms: int) -> str | None:
        unique_key = props.decode_properties(message.properties).get(props.UNIQ_KEY, "")
        try:
            return RecallHandle(topic, self.config.broker_name, deliver_ms, unique_key).encode()
        except RecallHandleError:
            return None  # no client id (ali-ons): nothing a recall could name

    # -- recall ------------------------------------------------------------------

    async def recall(self, topic: str, handle: str, producer_group: str | None) -> str:
        try:
            decoded = RecallHandle.decode(handle)
        except RecallHandleError as exc:
            raise BrokerError(ResponseCode.ILLEGAL_OPERATION, f"recall failed, {exc}") from None
        if decoded.topic != topic:
            raise BrokerError(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if decoded.broker_name != self.config.broker_name:
            raise BrokerError(
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, the handle names broker {decoded.broker_name}, "
                f"this is {self.config.broker_name}",
            )
        time_left = decoded.deliver_ms - self.clock.now_ms()
        if time_left <= 0 or time_left >= self.max_delay_ms:
            raise BrokerError(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        outcome = await self.engine.recall(
            topic, decoded.unique_key, decoded.deliver_ms, producer_group=producer_group
        )
        if outcome is RecallOutcome.RECALLED:
            return decoded.unique_key
        if outcome is RecallOutcome.FAILED:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        raise BrokerError(
            ResponseCode.ILLEGAL_OPERATION,
            "recall failed, the message was already delivered",
        )

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        await self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()
