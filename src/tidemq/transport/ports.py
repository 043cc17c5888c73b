"""A free loopback port, for servers started on "any free port" by tools and tests."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it; another program may
    take it before it is used, which callers' start-up retries or errors cover)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
