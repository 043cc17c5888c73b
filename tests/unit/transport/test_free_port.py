"""free_port never names a port twice in a process and keeps out of the kernel's own range."""

from __future__ import annotations

import socket

from tidemq.transport import ports
from tidemq.transport.ports import free_port


def test_ports_handed_out_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    chosen = [free_port() for _ in range(300)]
    assert len(set(chosen)) == len(chosen)
    ephemeral_low, _ = ports._ephemeral_range()
    assert all(20000 <= port < ephemeral_low for port in chosen)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", chosen[-1]))


def test_a_port_someone_listens_on_is_never_chosen(monkeypatch) -> None:
    with socket.socket() as taken, socket.socket() as probe:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        probe.bind(("127.0.0.1", 0))
        idle = probe.getsockname()[1]
        probe.close()
        draws = iter([busy, busy, idle])
        monkeypatch.setattr(ports, "_ephemeral_range", lambda: (max(busy, idle) + 1000, 60999))
        monkeypatch.setattr(ports._pick, "randrange", lambda low, high: next(draws))
        assert free_port() == idle
