"""TransactionProcessor: END_TRANSACTION, TIDEMQ_END_TRANSACTIONS.

The end of a transaction for both protocols (the gRPC EndTransaction finds
the half by its key with `locate_half`, then calls `end_transaction`); the
rules themselves are BrokerTransactions' (tidemq.broker.transactions).
Java reference (rocketmq-all 4.9.7): EndTransactionProcessor.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import msgspec

from tidemq.broker.config import BrokerConfig
from tidemq.broker.hooks import TransactionHooks
from tidemq.broker.remoting import RequestHandler
from tidemq.broker.requests import BrokerError
from tidemq.ha.config import BrokerRole
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import EndTransactionRequestHeader, decode_header
from tidemq.transport import Connection

__all__ = ["TransactionProcessor"]

log = logging.getLogger(__name__)


class _EndItems(msgspec.Struct, gc=False):
    """A TIDEMQ_END_TRANSACTIONS body as the fast decoder takes it: integers
    and booleans exactly (the body the Spark sink sends)."""

    items: list[tuple[int, int, bool]]


_END_ITEMS = msgspec.json.Decoder(_EndItems)


def end_items(body: bytes) -> list[tuple[int, int, bool]]:
    """The items of a TIDEMQ_END_TRANSACTIONS body: (commit-log offset,
    half-queue offset, commit?). Decoded strictly by msgspec; anything else
    (numbers as strings, other truth values, malformed JSON) by the standard
    library, which converts or refuses it (ValueError, KeyError, TypeError),
    with the same items for any body both take."""
    try:
        return _END_ITEMS.decode(body).items
    except (msgspec.DecodeError, ValueError, RecursionError):
        pass
    document = json.loads(body)
    return [(int(clo), int(qo), bool(commit)) for clo, qo, commit in document["items"]]


SLAVE_END_REMARK = "Message store is slave mode, so end transaction is forbidden."
"""RocketMQ's EndTransactionProcessor answers a slave SLAVE_NOT_AVAILABLE (and logs this)."""


class TransactionProcessor:
    """Ends transactions through the broker's TransactionHooks (None: disabled)."""

    def __init__(self, config: BrokerConfig, transactions: TransactionHooks | None) -> None:
        self.config = config
        self.transactions = transactions

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.END_TRANSACTION: self.handle_end_transaction,
            RequestCode.TIDEMQ_END_TRANSACTIONS: self.handle_end_transactions,
        }

    def _enabled(self) -> TransactionHooks:
        if self.config.broker_role is BrokerRole.SLAVE:
            raise BrokerError(ResponseCode.SLAVE_NOT_AVAILABLE, SLAVE_END_REMARK)
        if self.transactions is None:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_name}] transactions are disabled",
            )
        return self.transactions

    # -- remoting ------------------------------------------------------------------------

    async def handle_end_transaction(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        """Java producers send END_TRANSACTION oneway: answer only when asked to."""
        header = decode_header(EndTransactionRequestHeader, request.ext_fields)
        try:
            await self.end_transaction(header)
        except BrokerError as exc:
            if request.is_oneway:
                log.warning("END_TRANSACTION from %s refused: %s", connection.remote, exc.remark)
                return None
            raise
        if request.is_oneway:
            return None
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def handle_end_transactions(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """TIDEMQ_END_TRANSACTIONS (a tidemq extension): header `producerGroup`,
        body JSON ``{"items": [[commitLogOffset, tranStateTableOffset, commit], ...]}``;
        answers `ended` and `resolvedBefore`."""
        group = str(request.ext_fields.get("producerGroup") or "")
        if not group:
            raise BrokerError(ResponseCode.MESSAGE_ILLEGAL, "the producerGroup field is missing")
        try:
            items = end_items(request.body or b"")
        except (ValueError, KeyError, TypeError) as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f'the body must be {{"items": [[commitLogOffset, tranStateTableOffset, '
                f"commit], ...]}} ({exc})",
            ) from None
        ended, before = await self.end_transactions(group, items)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            None,
            {"ended": str(ended), "resolvedBefore": str(before)},
        )

    # -- the rules' entry points ---------------------------------------------------------

    async def end_transaction(self, header: EndTransactionRequestHeader) -> None:
        """END_TRANSACTION: commit, roll back, or leave for check-back."""
        await self._enabled().end(header)

    def locate_half(self, key: str) -> tuple[int, int] | None:
        """Where the half message of transaction `key` (its UNIQ_KEY) lies:
        (commit-log offset, half-queue offset), or None."""
        return self._enabled().locate(key)

    async def end_transactions(
        self, producer_group: str, items: Sequence[tuple[int, int, bool]]
    ) -> tuple[int, int]:
        """TIDEMQ_END_TRANSACTIONS: many ENDs in one append (see BrokerTransactions.end_many)."""
        return await self._enabled().end_many(producer_group, items)
