"""Which broker of its group each message queue is pulled from next.

RocketMQ's PullAPIWrapper.pullFromWhichNodeTable: every pull answer carries
the broker's `suggestWhichBrokerId` (a master sends a consumer that is far
behind to a slave when it has `slave_read_enable`; a slave points back to
the master), and the next pull of that queue goes there
(updatePullFromWhichNode / recalculatePullFromWhichNode). A queue never
pulled goes to the master. When the suggested broker is not in the route
(the master is down) the client reads from another broker of the group:
ClientInstance.find_broker_in_subscribe.
"""

from __future__ import annotations

from tidemq.client.model import MASTER_ID
from tidemq.common.message import MessageQueue

__all__ = ["MASTER_ID", "PullNodeTable"]


class PullNodeTable:
    """Message queue -> the broker id its last pull answer suggested."""

    def __init__(self) -> None:
        self._suggested: dict[MessageQueue, int] = {}

    def which(self, mq: MessageQueue) -> int:
        """recalculatePullFromWhichNode: the suggestion, else the master."""
        return self._suggested.get(mq, MASTER_ID)

    def update(self, mq: MessageQueue, broker_id: int) -> None:
        """updatePullFromWhichNode (a negative id from a broken answer: the master)."""
        self._suggested[mq] = broker_id if broker_id >= 0 else MASTER_ID

    def forget(self, mq: MessageQueue) -> None:
        self._suggested.pop(mq, None)
