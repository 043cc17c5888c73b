"""Transactional messages on a broker: half messages, END_TRANSACTION, check-back.

Placeholder until the transaction work lands (issue #5); see hooks.TransactionHooks.
"""

from __future__ import annotations

from tidemq.broker.config import BrokerConfig
from tidemq.common.clock import Clock
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.store.api import MessageStore, MessageToStore


class BrokerTransactions:
    """TransactionHooks over one store."""

    def __init__(self, config: BrokerConfig, store: MessageStore, clock: Clock, service: object):
        self.config = config
        self.store = store
        self.clock = clock
        self.service = service

    def prepare(self, message: MessageToStore, producer_group: str) -> MessageToStore:
        raise NotImplementedError

    async def end(self, header: EndTransactionRequestHeader) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
