"""The server's sweep closes idle connections; its acceptor survives running out of descriptors."""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from transport_helpers import RawPeer, echo

from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.testing.waiting import eventually
from tidemq.transport import Connection, RemotingClient, RemotingServer
from tidemq.transport.acceptor import Acceptor
from tidemq.transport.housekeeping import LogThrottle, Verdict, verdict

ServerFactory = Callable[..., Awaitable[RemotingServer]]
ClientFactory = Callable[..., RemotingClient]
PeerFactory = Callable[[int], Awaitable[RawPeer]]

ECHO, HOLD = 1, 2
FAST_SWEEP = {"sweep_interval_s": 0.05}
HAND_SWEEP = {"sweep_interval_s": 3600.0}
"""The sweep task never runs: the test calls `server.sweep(now)` at made-up loop times
(a connection's quiet time is measured between sweeps, so no real time has to pass)."""
STARVATION_S = 1.2
"""How long the acceptor is starved: the window whose failed accepts and log lines are
counted. It is the quantity measured (the backoff's rate over real loop time), so no
condition can replace waiting it out."""

# -- the pure decisions ------------------------------------------------------------------

seconds = st.floats(min_value=0, max_value=1000, allow_nan=False)
maybe_seconds = st.none() | seconds


@given(
    quiet=seconds,
    busy=st.booleans(),
    frame_age=maybe_seconds,
    waited=maybe_seconds,
    max_idle=st.none() | st.floats(min_value=0.1, max_value=500),
    frame_timeout=st.floats(min_value=0.1, max_value=500),
)
def test_verdict_rules(
    quiet: float,
    busy: bool,
    frame_age: float | None,
    waited: float | None,
    max_idle: float | None,
    frame_timeout: float,
) -> None:
    found = verdict(
        quiet_s=quiet,
        busy=busy,
        frame_age_s=frame_age,
        waited_s=waited,
        max_idle_s=max_idle,
        frame_timeout_s=frame_timeout,
    )
    if waited is not None:  # paused by the server: only the budget wait counts
        assert found is (Verdict.NO_BUDGET if waited > frame_timeout else None)
    elif frame_age is not None and frame_age > frame_timeout:
        assert found is Verdict.FRAME_TOO_SLOW
    else:
        idle = max_idle is not None and not busy and quiet >= max_idle
        assert found is (Verdict.IDLE if idle else None)


def test_idle_check_off_when_max_idle_is_zero_or_none() -> None:
    for max_idle in (None, 0.0):
        found = verdict(
            quiet_s=1e9,
            busy=False,
            frame_age_s=None,
            waited_s=None,
            max_idle_s=max_idle,
            frame_timeout_s=30,
        )
        assert found is None


@given(
    interval=st.floats(min_value=0.01, max_value=100),
    gaps=st.lists(st.floats(min_value=0, max_value=50), max_size=200),
)
def test_log_throttle_allows_at_most_one_line_per_interval(
    interval: float, gaps: list[float]
) -> None:
    throttle = LogThrottle(interval)
    now = 0.0
    allowed = [now] if throttle.due(now) else []
    assert allowed == [0.0], "the first line is always written"
    for gap in gaps:
        now += gap
        if throttle.due(now):
            allowed.append(now)
    assert all(b - a >= interval for a, b in itertools.pairwise(allowed))
    assert len(allowed) <= now / interval + 1


# -- idle connections ------------------------------------------------------------------


async def test_a_silent_connection_is_closed_after_max_idle(
    make_server: ServerFactory, raw_peers: PeerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidemq.transport")
    server = await make_server({ECHO: echo()}, max_idle_s=0.3, **FAST_SWEEP)
    loop = asyncio.get_running_loop()
    started = loop.time()
    peer = await raw_peers(server.port)
    await peer.wait_eof(timeout=5)
    assert loop.time() - started >= 0.3
    await eventually(lambda: not server.connections, "the server to forget it")
    assert any("idle for 0.3s" in r.getMessage() for r in caplog.records)


async def test_traffic_either_way_keeps_a_connection(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server({ECHO: echo()}, max_idle_s=1.0, **HAND_SWEEP)
    peer = await raw_peers(server.port)
    now = asyncio.get_running_loop().time()
    # the peer asks (reads on the server) for three idle limits ...
    for opaque in range(1, 7):
        await peer.send(RemotingCommand.request(ECHO, opaque=opaque).encode())
        assert (await peer.read_command()).opaque == opaque
        now += 0.5
        assert server.sweep(now) == {}
    # ... then only the server talks (writes on the server) for three more
    (connection,) = server.connections
    for _ in range(6):
        connection.send_oneway(RemotingCommand.request(ECHO))
        await peer.read_command()
        now += 0.5
        assert server.sweep(now) == {}
    assert not connection.closed, "traffic in either direction is activity"
    assert list(server.sweep(now + 1.5)) == [Verdict.IDLE]  # and silence closes it
    await peer.wait_eof()


async def test_a_connection_with_a_request_in_hand_is_not_idle(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    release = asyncio.Event()

    async def hold(request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        await release.wait()  # a long-polling pull held by the broker
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=b"late")

    server = await make_server({HOLD: hold}, max_idle_s=0.2, **HAND_SWEEP)
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    answer = asyncio.create_task(client.invoke(address, RemotingCommand.request(HOLD), timeout=10))
    await eventually(lambda: server.in_flight == 1, "the request to be held")
    now = asyncio.get_running_loop().time()
    assert server.sweep(now + 0.8) == {}, "four idle limits with a request in hand"
    assert len(server.connections) == 1
    release.set()
    assert (await answer).body == b"late"
    await eventually(lambda: server.in_flight == 0, "the request done")
    assert server.sweep(now + 1.0) == {}  # the answer was traffic ...
    assert list(server.sweep(now + 1.5)) == [Verdict.IDLE]  # ... then it is idle like any


async def test_a_client_whose_connection_was_idled_out_reconnects(
    make_server: ServerFactory, make_client: ClientFactory
) -> None:
    server = await make_server({ECHO: echo()}, max_idle_s=0.2, **FAST_SWEEP)
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    await client.invoke(address, RemotingCommand.request(ECHO))
    await eventually(lambda: not client.connections, "the server to close it")
    response = await client.invoke(address, RemotingCommand.request(ECHO, body=b"again"))
    assert response.body == b"again"


# -- accepting without descriptors -----------------------------------------------------


class StarvedListener(socket.socket):
    """A listening socket whose accept() fails with EMFILE while `starved` is set."""

    starved = True

    def accept(self) -> tuple[socket.socket, object]:
        if self.starved:
            raise OSError(errno.EMFILE, "Too many open files")
        return super().accept()


async def test_accept_failures_back_off_and_are_logged_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = StarvedListener(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    accepted: list[socket.socket] = []
    acceptor = Acceptor(listener, accepted.append, name="test", retry_s=0.05, report_interval_s=0.5)
    acceptor.start()
    loop = asyncio.get_running_loop()
    client = socket.create_connection(acceptor.address)
    try:
        started = loop.time()
        await asyncio.sleep(STARVATION_S)  # the measured window (see STARVATION_S)
        elapsed = loop.time() - started
        # one failed accept per retry, the pauses doubling from 10 ms to 50 ms (asyncio's
        # loop made up to 100 per retry, each scheduling another retry)
        assert 0 < acceptor.failures <= elapsed / 0.05 + 5
        lines = [r.getMessage() for r in caplog.records if r.name == "tidemq.transport"]
        assert 1 <= len(lines) <= elapsed / 0.5 + 1, lines
        assert "EMFILE" in lines[0] and "cannot accept" in lines[0]
        listener.starved = False
        await eventually(lambda: accepted, "the queued connection to be accepted")

        def recovery_reported() -> bool:
            acceptor.report()  # what the server's sweep does every second
            return any("accepting connections" in r.getMessage() for r in caplog.records)

        await eventually(recovery_reported, "the recovery line")
    finally:
        client.close()
        for sock in accepted:
            sock.close()
        acceptor.close()


async def test_by_default_a_connection_may_stay_quiet_for_120_seconds(
    make_server: ServerFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server({ECHO: echo()})  # the sweep is driven by hand below
    assert server.max_idle_s == 120.0
    peer = await raw_peers(server.port)
    await eventually(lambda: server.connections, "the connection")
    now = asyncio.get_running_loop().time()
    assert server.sweep(now + 119) == {}
    closed = server.sweep(now + 121)
    assert list(closed) == [Verdict.IDLE]
    await peer.wait_eof()
