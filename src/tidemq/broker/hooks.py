"""What the processors ask of the delay, timer and transaction parts of a broker.

The composition root (tidemq.broker.assembly) builds each part first and
hands it to the processors that use it (None when the feature is off); both
protocols reach them through those processors, so the rules live once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.store.api import MessageToStore


class DelayHooks(Protocol):
    """Delay levels: parking a message until its level's time has passed."""

    def schedule(self, message: MessageToStore, level: int) -> MessageToStore:
        """`message` parked in SCHEDULE_TOPIC_XXXX under delay `level` (clamped)."""
        ...


class TimerHooks(Protocol):
    """Timer messages: parking at send time, recall, the delivery service."""

    def park(self, message: MessageToStore) -> tuple[MessageToStore, int] | None:
        """(the message parked in the timer topic, its delivery time in ms), or
        None when `message` carries no timer property or is due already (it is
        then stored as a normal message). BrokerError(MESSAGE_ILLEGAL) when the
        time is malformed or beyond the horizon; also when timers are disabled."""
        ...

    def parked_stored(self, topic: str) -> None:
        """A timer message of `topic` (what `park` made of it) was stored."""
        ...

    def recall_handle(self, topic: str, message: MessageToStore, deliver_ms: int) -> str | None:
        """The handle a send result carries for a parked message; None when the
        message has no client id (UNIQ_KEY) to name it by (ali-ons sets none)."""
        ...

    async def recall(self, topic: str, handle: str, producer_group: str | None) -> str:
        """RECALL_MESSAGE: the recalled message's id (its UNIQ_KEY).
        BrokerError(ILLEGAL_OPERATION) for a bad handle or a time already passed."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class TransactionHooks(Protocol):
    """Transactional messages: half messages, their end, the check-back service."""

    def prepare(self, message: MessageToStore, producer_group: str) -> MessageToStore:
        """The half message to store in RMQ_SYS_TRANS_HALF_TOPIC instead of
        `message`. BrokerError(MESSAGE_ILLEGAL) when it also has a delay level
        or a timer property."""
        ...

    def halves_stored(self, topic: str, count: int = 1) -> None:
        """`count` half messages of `topic` a producer sent were stored."""
        ...

    async def end(self, header: EndTransactionRequestHeader) -> None:
        """END_TRANSACTION: commit (8) restores the half message to its real
        topic, rollback (12) discards it; unknown (0) leaves it for check-back.
        BrokerError with Java's codes and remarks for a half message that is
        missing or does not match."""
        ...

    def locate(self, key: str) -> tuple[int, int] | None:
        """(commit-log offset, half-queue offset) of the newest copy of the
        half message whose UNIQ_KEY is `key`; None when there is none."""
        ...

    async def end_many(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int]:
        """End many halves in one append: (commit-log offset, half-queue offset,
        commit?) each; all checked first. (ended now, resolved before)."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
