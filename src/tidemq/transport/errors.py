"""What a remoting call can fail with, apart from the answer it gets back.

A response with a non-zero code is not an exception here: ``invoke`` returns
it and the caller decides. These exceptions mean no answer arrived.
"""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every transport failure."""


class RemotingConnectError(RemotingError):
    """The connection could not be opened (refused, unreachable, bad address, connect timeout)."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the request's timeout; the connection stays open."""


class RemotingClosedError(RemotingError):
    """The connection (or the client) closed before the response arrived."""


class RemotingForeignProtocolError(RemotingClosedError):
    """The peer speaks another protocol (``protocol``: "HTTP/2", "HTTP/1.x", "TLS"), seen
    from its first bytes; the connection was closed at once."""

    def __init__(self, message: str, protocol: str) -> None:
        super().__init__(message)
        self.protocol = protocol
