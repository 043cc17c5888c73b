"""Timer messages on a broker: parking at send, recall, the timer service.

Placeholder until the timer engine lands (issue #5); see hooks.TimerHooks.
"""

from __future__ import annotations

from tidemq.broker.config import BrokerConfig
from tidemq.common.clock import Clock
from tidemq.store.api import MessageStore, MessageToStore


class BrokerTimers:
    """TimerHooks over one store."""

    def __init__(self, config: BrokerConfig, store: MessageStore, clock: Clock, service: object):
        self.config = config
        self.store = store
        self.clock = clock
        self.service = service

    def park(self, message: MessageToStore) -> tuple[MessageToStore, int] | None:
        raise NotImplementedError

    def recall_handle(self, topic: str, message: MessageToStore, deliver_ms: int) -> str:
        raise NotImplementedError

    async def recall(self, topic: str, handle: str, producer_group: str | None) -> str:
        raise NotImplementedError

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
