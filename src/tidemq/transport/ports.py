"""A free loopback port, for servers started on "any free port" by tools and
tests, and the wait until a server started there listens."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

__all__ = ["free_port", "wait_listening"]

_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_CHOSEN_PORT = 20000
_PICK_ATTEMPTS = 500
_handed_out: set[int] = set()
_pick = random.SystemRandom()  # not the seeded global generator: tests seed that one


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out on its own (bind to 0, outgoing connections)."""
    try:
        low, high = _EPHEMERAL_RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on right now, and one this process has not handed out before.

    Why not simply bind to port 0: the kernel gives the same port again once the probe
    closes, so two calls in a row could name one port twice (a name server and its Raft
    port then collided), and every outgoing connection also takes ports from that range
    before the server binds. So the port is drawn at random below the kernel's ephemeral
    range, and never twice per process. Another program may still take it before it is
    used; callers' start-up errors say so."""
    ephemeral_low, _ = _ephemeral_range()
    if ephemeral_low - _LOWEST_CHOSEN_PORT >= 1000:
        for _ in range(_PICK_ATTEMPTS):
            port = _pick.randrange(_LOWEST_CHOSEN_PORT, ephemeral_low)
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    for _ in range(_PICK_ATTEMPTS):  # no room below the ephemeral range: the kernel chooses
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise OSError("no free loopback port found")


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
