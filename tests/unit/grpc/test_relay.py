"""The relay's logic with recording transports and a hand-fired timer: what is
passed on, when reading pauses and resumes (back-pressure), how closing one
end closes the other, aborts a stuck one and reports the end once."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.grpc.relay import Relay, RelayEnd


class FakeTransport:
    """Records writes and reading state; `close` is graceful (the protocol learns
    of it later, via `finish`), `abort` immediate."""

    def __init__(self, end: RelayEnd) -> None:
        self.end = end
        self.written: list[bytes] = []
        self.reading = True
        self.closing = False
        self.aborted = False
        self.gone = False

    def write(self, data: bytes) -> None:
        assert not self.gone
        self.written.append(data)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.aborted = True
        self.finish()

    def finish(self) -> None:
        """The connection is gone (a close flushed, or the peer left)."""
        if not self.gone:
            self.gone = True
            self.end.connection_lost(None)


class FakeTimers:
    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None], FakeTimer]] = []

    def later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        self.pending.append((delay, callback, timer))
        return timer

    def fire_all(self) -> None:
        for _, callback, timer in self.pending:
            if not timer.cancelled:
                callback()
        self.pending.clear()


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def relay_pair(
    started: bool = True,
) -> tuple[Relay, FakeTransport, FakeTransport, FakeTimers, list[Relay]]:
    timers = FakeTimers()
    closed: list[Relay] = []
    relay = Relay(timers.later, closed.append, close_timeout_s=5.0)
    client, upstream = FakeTransport(relay.client), FakeTransport(relay.upstream)
    relay.client.connection_made(client)  # type: ignore[arg-type]
    relay.upstream.connection_made(upstream)  # type: ignore[arg-type]
    if started:
        relay.start()
    return relay, client, upstream, timers, closed


def test_bytes_go_across_both_ways() -> None:
    relay, client, upstream, _, _ = relay_pair()
    relay.client.data_received(b"PRI * HTTP/2.0")
    relay.upstream.data_received(b"settings")
    assert upstream.written == [b"PRI * HTTP/2.0"]
    assert client.written == [b"settings"]
    assert relay.client.bytes_in == 14 and relay.upstream.bytes_in == 8


def test_nothing_is_read_before_the_start_and_what_came_is_held_then_passed_on() -> None:
    relay, client, upstream, _, _ = relay_pair(started=False)
    assert not client.reading and not upstream.reading
    relay.client.data_received(b"early ")
    relay.client.data_received(b"bytes")
    assert upstream.written == []
    relay.start()
    assert upstream.written == [b"early bytes"]
    assert client.reading and upstream.reading


def test_a_full_write_buffer_pauses_the_other_end_until_it_drains() -> None:
    relay, client, upstream, _, _ = relay_pair()
    relay.upstream.pause_writing()  # grpc is not reading: stop reading the client
    assert not client.reading and upstream.reading
    relay.client.pause_writing()  # and the client is not reading either
    assert not upstream.reading
    relay.upstream.resume_writing()
    assert client.reading and not upstream.reading
    relay.client.resume_writing()
    assert client.reading and upstream.reading


def test_a_buffer_already_full_at_the_start_keeps_the_other_end_paused() -> None:
    relay, client, upstream, _, _ = relay_pair(started=False)
    relay.upstream.pause_writing()
    relay.start()
    assert not client.reading and upstream.reading
    relay.upstream.resume_writing()
    assert client.reading


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["pu", "ru", "pc", "rc"]), max_size=30))
def test_each_end_reads_exactly_when_the_other_can_take_more(events: list[str]) -> None:
    """Whatever order the transports report their buffers in, an end reads
    if and only if the other end's write buffer is not full."""
    relay, client, upstream, _, _ = relay_pair()
    for event in events:
        end = relay.upstream if event[1] == "u" else relay.client
        if event[0] == "p":
            end.pause_writing()
        else:
            end.resume_writing()
        assert client.reading is not relay.upstream.writing_paused
        assert upstream.reading is not relay.client.writing_paused


def test_the_client_leaving_closes_the_upstream_gracefully_and_reports_once() -> None:
    relay, client, upstream, timers, closed = relay_pair()
    client.finish()
    assert upstream.closing and not upstream.aborted
    assert closed == []  # the upstream is still flushing
    upstream.finish()
    assert closed == [relay]
    timers.fire_all()  # the abort deadline was cancelled
    assert not upstream.aborted and closed == [relay]


def test_end_of_stream_from_either_side_closes_both() -> None:
    relay, client, upstream, _, closed = relay_pair()
    relay.upstream.eof_received()
    assert client.closing and upstream.closing
    assert not client.reading and not upstream.reading
    client.finish()
    upstream.finish()
    assert closed == [relay]


def test_an_end_that_does_not_finish_closing_is_aborted_after_the_timeout() -> None:
    relay, client, upstream, timers, closed = relay_pair()
    client.finish()
    [(delay, _, _)] = timers.pending
    assert delay == 5.0
    timers.fire_all()
    assert upstream.aborted
    assert closed == [relay]


def test_bytes_arriving_while_closing_are_not_written_to_a_gone_end() -> None:
    relay, client, _, _, _ = relay_pair()
    client.finish()
    relay.upstream.data_received(b"late")  # the client transport is gone
    assert client.written == []


def test_an_abandoned_setup_finishes_with_one_end_or_none() -> None:
    timers = FakeTimers()
    closed: list[Relay] = []
    never = Relay(timers.later, closed.append)
    never.abort()  # the handshake failed: nothing ever connected
    assert closed == [never]
    half = Relay(timers.later, closed.append)
    client = FakeTransport(half.client)
    half.client.connection_made(client)  # type: ignore[arg-type]
    half.abort()  # grpc could not be reached
    assert client.aborted and closed == [never, half]
    # an upstream connecting after the relay was given up is dropped at once
    upstream = FakeTransport(half.upstream)
    half.upstream.connection_made(upstream)  # type: ignore[arg-type]
    assert upstream.aborted and closed == [never, half]
    half.start()
    assert not half.started
