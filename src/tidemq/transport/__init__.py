"""The only code in tidemq that touches sockets: asyncio TCP remoting server and
client, and blocking requests on a caller's own thread (blocking.py).

Framing and header codecs live in tidemq.protocol (sans-IO); this package adds
connections, opaque matching, deadlines, bounded in-flight work and shutdown.
"""

from .client import RemotingClient, parse_address
from .connection import Connection, Handler, OpaqueAllocator
from .errors import (
    RemotingClosedError,
    RemotingConnectError,
    RemotingError,
    RemotingForeignProtocolError,
    RemotingTimeoutError,
)
from .server import RemotingServer, not_supported
from .tls import ClientAuth, ServerTls, TlsConfig, TlsConfigError, TlsMode

__all__ = [
    "ClientAuth",
    "Connection",
    "Handler",
    "OpaqueAllocator",
    "RemotingClient",
    "RemotingClosedError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingForeignProtocolError",
    "RemotingServer",
    "RemotingTimeoutError",
    "ServerTls",
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "not_supported",
    "parse_address",
]
