"""A free loopback port, for servers started on "any free port" by tools and
tests, and the wait until a server started there listens."""

from __future__ import annotations

import socket
import time

__all__ = ["free_port", "wait_listening"]


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it; another program may
    take it before it is used, which callers' start-up retries or errors cover)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, deadline: float) -> bool:
    """Poll until something accepts connections on loopback `port`, until the
    time.monotonic() `deadline`: True once it does, False if the deadline passed."""
    while True:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
