"""One budget bounds the bytes all connections of a server hold for frames still arriving."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transport_helpers import RawPeer, echo

from tidemq.protocol import RemotingCommand, SerializeType
from tidemq.protocol.frame import MAX_FRAME_SIZE, frame_prefix
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient, RemotingClosedError, RemotingServer
from tidemq.transport.frame_budget import FrameAllowance, FrameBudget

ServerFactory = Callable[..., Awaitable[RemotingServer]]
ClientFactory = Callable[..., RemotingClient]
PeerFactory = Callable[[int], Awaitable[RawPeer]]

ECHO = 1
MiB = 1024 * 1024
READ_CHUNK = 256 * 1024
"""asyncio reads at most this much at once: what a paused connection may hold unreserved."""
WHOLE_MAX_FRAME = 4 + MAX_FRAME_SIZE


# -- the budget on its own ---------------------------------------------------------------


class Peer:
    """A FrameAllowance with counted pause/resume, as a connection would drive it."""

    def __init__(self, budget: FrameBudget) -> None:
        self.paused = 0
        self.resumed = 0
        self.allowance = FrameAllowance(
            budget, pause=self._pause, resume=self._resume, clock=lambda: 0.0
        )

    def _pause(self) -> None:
        self.paused += 1

    def _resume(self) -> None:
        self.resumed += 1

    @property
    def waiting(self) -> bool:
        return self.allowance.waiting_since is not None


operations = st.lists(
    st.tuples(
        st.sampled_from(["read", "close"]),
        st.integers(min_value=0, max_value=5),
        st.integers(min_value=0, max_value=120),
        st.booleans(),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(min_value=1, max_value=100), ops=operations)
def test_reservations_never_exceed_the_limit_and_waiters_go_first_come_first_served(
    limit: int, ops: list[tuple[str, int, int, bool]]
) -> None:
    budget = FrameBudget(limit)
    peers = [Peer(budget) for _ in range(6)]
    wanted: dict[int, int] = {}
    queue: list[int] = []  # the test's own model of the waiting order
    for op, index, size, completed in ops:
        peer = peers[index]
        if op == "read" and not peer.waiting:  # a paused connection does not read
            if not peer.allowance.after_read(size, completed):
                assert size > limit
                peer.allowance.close()  # the connection is closed ...
                peers[index] = Peer(budget)  # ... and another one takes its place
            elif peer.waiting:
                queue.append(index)
                wanted[index] = size
        elif op == "close":
            peer.allowance.close()
            peers[index] = Peer(budget)
            if index in queue:
                queue.remove(index)
        queue = [i for i in queue if peers[i].waiting]
        assert budget.reserved == sum(p.allowance.reserved for p in peers)
        assert budget.reserved <= limit and budget.peak <= limit
        assert budget.waiting == len(queue) == sum(p.waiting for p in peers)
        assert all(peers[i].allowance.reserved == 0 for i in queue), "waiters hold nothing"
        if queue:  # the head waits only because it does not fit
            assert budget.reserved + wanted[queue[0]] > limit
        for p in peers:
            assert p.paused - p.resumed == (1 if p.waiting else 0)


def test_a_frame_larger_than_the_whole_budget_is_refused() -> None:
    budget = FrameBudget(100)
    peer = Peer(budget)
    assert not peer.allowance.after_read(101, completed_frames=False)
    assert budget.reserved == 0 and peer.paused == 0


def test_granted_frames_restart_their_clock() -> None:
    now = [0.0]
    budget = FrameBudget(10)
    first = FrameAllowance(budget, pause=lambda: None, resume=lambda: None, clock=lambda: now[0])
    second = FrameAllowance(budget, pause=lambda: None, resume=lambda: None, clock=lambda: now[0])
    assert first.after_read(8, completed_frames=False)
    assert second.after_read(8, completed_frames=False)
    assert second.waiting_since == 0.0 and second.frame_since == 0.0
    now[0] = 5.0
    first.after_read(0, completed_frames=True)  # its frame completed: 8 bytes free
    assert second.waiting_since is None and second.frame_since == 5.0
    assert budget.reserved == 8


# -- a real server ---------------------------------------------------------------------


async def closed_by_server(peer: RawPeer, timeout: float = 15) -> None:
    """Wait until the server ends the connection (an abort arrives as a reset)."""
    with contextlib.suppress(ConnectionResetError):
        await peer.wait_eof(timeout)


def partial_max_frame(body_bytes: int) -> bytes:
    """The 8-byte prefix of a 16 MiB frame and the first `body_bytes` after it."""
    header_length = 10
    prefix = frame_prefix(SerializeType.JSON, header_length, MAX_FRAME_SIZE - 4 - header_length)
    return prefix + bytes(body_bytes)


@pytest.mark.slow
async def test_partial_frames_are_held_within_the_budget(
    make_server: ServerFactory,
    make_client: ClientFactory,
    raw_peers: PeerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cap = 40 * MiB  # room for two whole 16 MiB frames
    server = await make_server(
        {ECHO: echo()}, frame_budget_bytes=cap, frame_timeout_s=3.0, sweep_interval_s=0.05
    )
    budget = server.frame_budget
    hogs = [await raw_peers(server.port) for _ in range(5)]
    for hog in hogs:
        hog.writer.write(partial_max_frame(MiB))  # no drain: a paused peer cannot finish

    def settled() -> bool:
        return budget.reserved == 2 * WHOLE_MAX_FRAME and budget.waiting == 3

    await eventually(settled, "two frames reserved, three connections paused", timeout=10)
    held = sum(c.buffered for c in server.connections)
    assert held <= 2 * (MiB + 8) + 3 * READ_CHUNK, held
    assert budget.peak <= cap

    # a normal request on another connection is answered meanwhile
    client = make_client()
    response = await client.invoke(
        f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, body=b"small"), timeout=5
    )
    assert response.body == b"small"

    # stalled frames are closed after the time limit; waiting ones get their turn, then theirs
    closed = 0
    for hog in hogs:
        await closed_by_server(hog)
        closed += 1
        assert budget.peak <= cap
    assert closed == 5
    await eventually(lambda: budget.reserved == 0 and budget.waiting == 0, "the budget back")
    messages = [r.getMessage() for r in caplog.records if r.name == "tidemq.transport"]
    assert any("a frame did not complete in time within 3s" in m for m in messages), messages
    assert budget.peak <= cap


async def test_a_large_message_waits_for_budget_and_then_goes_through(
    make_server: ServerFactory, make_client: ClientFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server(
        {ECHO: echo()}, frame_budget_bytes=20 * MiB, frame_timeout_s=20, sweep_interval_s=0.05
    )
    hog = await raw_peers(server.port)
    hog.writer.write(partial_max_frame(64 * 1024))
    await eventually(lambda: server.frame_budget.reserved == WHOLE_MAX_FRAME, "the hog's share")
    client = make_client()
    body = bytes(4 * MiB)
    answer = asyncio.create_task(
        client.invoke(
            f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, body=body), timeout=20
        )
    )
    await eventually(lambda: server.frame_budget.waiting == 1, "the 4 MiB frame to wait")
    assert not answer.done()
    await hog.close()
    response = await asyncio.wait_for(answer, 20)
    assert len(response.body) == len(body)


async def test_a_frame_that_waits_too_long_for_budget_is_refused(
    make_server: ServerFactory, make_client: ClientFactory, raw_peers: PeerFactory
) -> None:
    server = await make_server(
        {ECHO: echo()},
        frame_budget_bytes=WHOLE_MAX_FRAME,
        frame_timeout_s=2.0,
        sweep_interval_s=0.05,
    )
    first, second = await raw_peers(server.port), await raw_peers(server.port)
    first.writer.write(partial_max_frame(64 * 1024))
    await eventually(lambda: server.frame_budget.reserved == WHOLE_MAX_FRAME, "the first share")
    second.writer.write(partial_max_frame(64 * 1024))
    await eventually(lambda: server.frame_budget.waiting == 1, "the second to wait")
    # The first is closed after 2 s and the second, first in line, gets the whole
    # budget for 2 s more: the large frame behind it has waited too long by then.
    client = make_client()
    with pytest.raises(RemotingClosedError):
        await client.invoke(
            f"127.0.0.1:{server.port}",
            RemotingCommand.request(ECHO, body=bytes(4 * MiB)),
            timeout=20,
        )


async def test_a_frame_larger_than_the_budget_closes_its_connection(
    make_server: ServerFactory, raw_peers: PeerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tidemq.transport")
    server = await make_server({ECHO: echo()}, frame_budget_bytes=MiB)
    peer = await raw_peers(server.port)
    await peer.send(partial_max_frame(100))
    await closed_by_server(peer)
    assert any("more than the whole frame buffer budget" in r.getMessage() for r in caplog.records)
