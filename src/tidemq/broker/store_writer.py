"""Where the broker's own background work stores messages: the store, with
the put counted in the statistics as a client's send would be.

The delay scheduler (due messages back to their topic) and POP (revived
copies, dead letters) put through here; it needs only the store and the
statistics, so it is made before both and before the send processor.
"""

from __future__ import annotations

from tidemq.broker.stats import DELAY, BrokerStats
from tidemq.store.api import MessageStore, MessageToStore, PutResult

__all__ = ["StoreWriter"]


class StoreWriter:
    """`put_restored(message)`: store one message the broker itself re-stores."""

    def __init__(self, store: MessageStore, stats: BrokerStats) -> None:
        self.store = store
        self.stats = stats

    async def put_restored(self, message: MessageToStore) -> PutResult:
        """Store `message`; a stored one counts as a put of its topic, of message
        type "delay" (as RocketMQ counts a delivered delay message; the other
        messages put here go to retry and DLQ topics, which /metrics leaves out)."""
        result = await self.store.put_message(message)
        if result.stored:
            self.stats.record_put(message.topic, 1, len(message.body), DELAY)
        return result
