"""`tidemq serve` with TLS, as a real process, and our Python client.

The mode x client-kind table of docs/tls.md, against real processes:
enforcing serves a TLS client and closes a plain one (a clear error, no
hang); permissive serves both on the same port; a certificate from an
unknown CA is refused when client verification is `require`. Garbage and
half handshakes on the ports never take the server down.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from tls_support import Certs, serve_args

from tidemq import (
    AsyncProducer,
    ClientError,
    ConsumeFromWhere,
    LitePullConsumer,
    Producer,
    make_message,
)
from tidemq.testing.processes import started
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


def produce_and_consume(namesrv: str, topic: str, group: str, **client: object) -> list[bytes]:
    """Send two messages and read them back, with the same client options."""
    with Producer(f"{group}-p", namesrv, **client) as producer:  # type: ignore[arg-type]
        for body in (b"one", b"two"):
            assert producer.send(make_message(topic, body)).status == "SEND_OK"
    consumer = LitePullConsumer(
        group,
        namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **client,  # type: ignore[arg-type]
    )
    consumer.subscribe(topic)
    received: list[bytes] = []
    with consumer:

        def polled() -> bool:
            received.extend(m.body for m in consumer.poll(1.0))
            return len(received) >= 2

        wait_until(polled, f"two messages of {topic}")
    return sorted(received)


def plain_send_fails(namesrv: str, topic: str) -> str:
    """A plain producer's send raises (it does not hang); the error's text."""
    with (
        Producer("plain-p", namesrv, retry_times_when_send_failed=0) as producer,
        pytest.raises(ClientError) as caught,
    ):
        producer.send(make_message(topic, b"plain"))
    return str(caught.value)


def test_enforcing_serves_tls_clients_and_refuses_plain_ones(tmp_path: Path, certs: Certs) -> None:
    args = serve_args(tmp_path, *certs.server_args("enforcing"))
    with started(args, tmp_path, "serve") as (server, ready):
        assert "TLS          enforcing" in "".join(server.output)
        namesrv = ready["namesrv"]
        got = produce_and_consume(namesrv, "TlsOrders", "TlsG", tls=certs.client_tls())
        assert got == [b"one", b"two"]
        error = plain_send_fails(namesrv, "TlsOrders")
        assert "TLS enforcing" in error


def test_permissive_serves_plain_and_tls_clients_on_the_same_port(
    tmp_path: Path, certs: Certs
) -> None:
    args = serve_args(tmp_path, *certs.server_args("permissive"), "--no-grpc")
    with started(args, tmp_path, "serve") as (_, ready):
        namesrv = ready["namesrv"]
        assert produce_and_consume(namesrv, "Mixed", "TlsG", tls=certs.client_tls()) == [
            b"one",
            b"two",
        ]
        assert produce_and_consume(namesrv, "Mixed2", "PlainG") == [b"one", b"two"]


def test_required_client_certificates_refuse_an_unknown_ca(tmp_path: Path, certs: Certs) -> None:
    args = serve_args(tmp_path, *certs.server_args("enforcing", "require"))
    with started(args, tmp_path, "serve") as (_, ready):
        namesrv = ready["namesrv"]
        good = certs.client_tls(certs.client)
        assert produce_and_consume(namesrv, "Mutual", "MutualG", tls=good) == [b"one", b"two"]
        for refused in (certs.client_tls(certs.stranger), certs.client_tls()):
            with (
                Producer(
                    "stranger-p", namesrv, tls=refused, retry_times_when_send_failed=0
                ) as producer,
                pytest.raises(ClientError),
            ):
                producer.send(make_message("Mutual", b"from a stranger"))


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_garbage_on_the_ports_never_takes_the_server_down(
    tmp_path: Path, certs: Certs, mode: str
) -> None:
    args = serve_args(tmp_path, *certs.server_args(mode), "--no-grpc")
    openings = [
        b"",
        b"\x16",
        b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03" + bytes(20),  # a ClientHello cut short
        b"\x16\x03\x01\xff\xff" + bytes(64),
        b"\x16" + bytes(range(256)) * 4,
        b"\x00\x00\x00\x10\x00\x00\x00\x08",
        b"GET / HTTP/1.1\r\n\r\n",
        bytes(range(255, 0, -1)),
    ]
    with started(args, tmp_path, "serve") as (server, ready):
        for address in (ready["namesrv"], ready["broker"]):
            host, port = address.rsplit(":", 1)
            for opening in openings:
                with socket.create_connection((host, int(port)), timeout=30) as sock:
                    sock.sendall(opening)
                    sock.shutdown(socket.SHUT_WR)  # half-close: the server must finish it
        assert server.popen.poll() is None
        got = produce_and_consume(ready["namesrv"], "AfterGarbage", "G", tls=certs.client_tls())
        assert got == [b"one", b"two"]


def test_blocking_sends_on_the_callers_thread_speak_tls(
    tmp_path: Path, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Producer.send's own sockets (transport/blocking.py) use the client's TLS:
    against an enforcing port every send after the route's is made on the
    caller's thread, none through the loop."""
    loop_sends: list[str] = []
    real = AsyncProducer._send_with_retries

    def counting(self: AsyncProducer, *args: Any, **kwargs: Any) -> Any:
        loop_sends.append("loop")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AsyncProducer, "_send_with_retries", counting)
    args = serve_args(tmp_path, *certs.server_args("enforcing"), "--no-grpc")
    with started(args, tmp_path, "serve") as (_, ready):
        namesrv, broker = ready["namesrv"], ready["broker"]
        with Producer("caller-p", namesrv, tls=certs.client_tls()) as producer:
            assert producer.send(make_message("CallerTls", b"route")).status == "SEND_OK"
            assert loop_sends == ["loop"]
            for i in range(5):
                sent = producer.send(make_message("CallerTls", f"m{i}".encode()))
                assert sent.status == "SEND_OK"
            assert loop_sends == ["loop"]  # none of the five went through the loop
            assert producer._channels is not None
            assert producer._channels.open_count(broker) == 1
