"""The one exception type of the client library.

Every failure a producer, consumer or admin call reports is a ClientError with
a readable one-line message and a code: the RocketMQ response code a server
sent (TOPIC_NOT_EXIST, MESSAGE_ILLEGAL, NO_PERMISSION, ...), or a client-side
code (ResponseCode.RPC_* when no answer came) so callers can branch on
``code`` without parsing text.
"""

from __future__ import annotations

from tidemq.protocol import ResponseCode


class ClientError(Exception):
    """A failed client call: a one-line readable message and a response code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)

    def __str__(self) -> str:
        return self.message

    @property
    def transport_failure(self) -> bool:
        """True when no answer came (worth trying again, maybe elsewhere)."""
        return self.code in TRANSPORT_CODES


TRANSPORT_CODES = frozenset(
    {
        ResponseCode.RPC_SEND_TO_CHANNEL_FAILED,
        ResponseCode.RPC_TIME_OUT,
        ResponseCode.RPC_UNKNOWN,
    }
)
"""Codes of ClientErrors raised because no answer came (worth trying again)."""
