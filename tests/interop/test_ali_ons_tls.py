"""The real ali-ons client against `tidemq serve --tls-mode permissive`.

ali-ons 3.x has no TLS option (its Channel is a tcp-base socket made with
Node's `net.connect`), so against a TLS port it can only speak plain: in
permissive mode it produces and consumes on the same port where our client
speaks TLS, and both see the same messages.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from ali_ons_harness import TidemqServer, consume_both, unique

from tidemq import ConsumeFromWhere, LitePullConsumer, TlsConfig
from tidemq.testing.certs import authority, issue
from tidemq.testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidemqServer]:
    """`tidemq serve` in TLS permissive mode (overrides conftest's plain server)."""
    root = tmp_path_factory.mktemp("interop-tls")
    ca = authority(root / "certs", "ca")
    cert = issue(root / "certs", ca, "server")
    args = ("--tls-mode", "permissive", "--tls-cert", str(cert.cert), "--tls-key", str(cert.key))
    srv = TidemqServer(root / "data", extra_args=(*args, "--no-grpc"))
    srv.ca = str(ca.cert)  # type: ignore[attr-defined]
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_ali_ons_speaks_plain_beside_a_tls_client_in_permissive_mode(  # type: ignore[no-untyped-def]
    scripts, server: TidemqServer
) -> None:
    topic, group = unique("TlsOns"), unique("TlsGroup")
    server.create_topic(topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=group)
    assert [e["label"] for e in producer.of_kind("sent")] == ["acl-0", "acl-1"]
    consume_both(scripts, topic, group, TIMEOUT)
    tls = TlsConfig(ca=server.ca)  # type: ignore[attr-defined]
    reader = LitePullConsumer(
        unique("TlsReader"),
        server.namesrv,
        tls=tls,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    reader.subscribe(topic)
    received: list[str] = []
    with reader:

        def polled() -> bool:
            received.extend(m.properties.get("label", "") for m in reader.poll(1.0))
            return len(received) >= 2

        wait_until(polled, "ali-ons' two messages, read over TLS")
    assert sorted(received) == ["acl-0", "acl-1"]
