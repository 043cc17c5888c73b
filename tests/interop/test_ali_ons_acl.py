"""The real ali-ons client against `tidemq serve --acl`: RocketMQ's ACL 1.0 as a 4.x
client speaks it (accessKey/secretKey options, HMAC-SHA1 over the sorted fields and
the body, plus its OnsChannel field).

With the right keys it produces and consumes; with a wrong secret, an unknown key, or
a topic its account may not publish to, it is refused with NO_PERMISSION and nothing
is stored or consumed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from ali_ons_harness import Event, TidemqServer, consume_both, unique

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]

ADMIN = ("--access-key", "adminKey01", "--secret-key", "adminSecret01")
APP = {"access_key": "onsKey0001", "secret_key": "onsSecret0001"}
FORBIDDEN = "AclForbidden"
POLICY = f"""\
accounts:
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: {APP["access_key"]}
    secretKey: {APP["secret_key"]}
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms: [{FORBIDDEN}=SUB]
"""
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidemqServer]:
    """`tidemq serve --acl` on ephemeral ports (overrides conftest's open server)."""
    root = tmp_path_factory.mktemp("interop-acl")
    acl = root / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    srv = TidemqServer(root / "data", extra_args=("--acl", str(acl)))
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def create(server: TidemqServer, topic: str) -> None:
    server.create_topic(topic, queues=4, auth=ADMIN)


def stored(server: TidemqServer, topic: str) -> int:
    return server.stored(topic, auth=ADMIN)


def refused_sends(events: list[Event]) -> list[Event]:
    return [e for e in events if e["event"] == "send_error"]


def test_ali_ons_with_keys_produces_and_consumes(scripts, server: TidemqServer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("AclOns"), unique("AclGroup")
    create(server, topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=group, **APP)
    assert [e["label"] for e in producer.of_kind("sent")] == ["acl-0", "acl-1"]
    assert refused_sends(producer.events) == []
    assert stored(server, topic) == 2
    consume_both(scripts, topic, group, TIMEOUT, **APP)


@pytest.mark.parametrize(
    ("case", "credentials", "remark"),
    [
        (
            "wrong secret",
            {"access_key": APP["access_key"], "secret_key": "not-the-secret"},
            "Check signature failed for accessKey=onsKey0001",
        ),
        (
            "unknown key",
            {"access_key": "nobodyKey01", "secret_key": "whatever01"},
            "No acl config for nobodyKey01",
        ),
        ("forbidden topic", APP, f"No default permission for topic:{FORBIDDEN}"),
    ],
)
def test_ali_ons_is_refused_and_nothing_is_stored(  # type: ignore[no-untyped-def]
    scripts, server: TidemqServer, case: str, credentials: dict[str, str], remark: str
) -> None:
    topic = FORBIDDEN if case == "forbidden topic" else unique("AclOns")
    if case == "forbidden topic":
        if (
            FORBIDDEN
            not in server.cli("topic", "list", "--json", "--namesrv", server.namesrv, *ADMIN).stdout
        ):
            create(server, topic)
    else:
        create(server, topic)
    before = stored(server, topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=unique("G"), **credentials)
    errors = refused_sends(producer.events)
    assert [e["label"] for e in errors] == ["acl-0", "acl-1"], producer.describe()
    refusals = producer.of_kind("refusal")
    assert refusals, producer.describe()
    assert all(e["code"] == 16 and remark in e["message"] for e in refusals), refusals
    assert producer.of_kind("sent") == []
    assert stored(server, topic) == before


def test_ali_ons_consumer_with_a_wrong_secret_consumes_nothing(  # type: ignore[no-untyped-def]
    scripts, server: TidemqServer
) -> None:
    topic, group = unique("AclOns"), unique("AclGroup")
    create(server, topic)
    scripts.run("acl", timeout=TIMEOUT, topic=topic, group=group, **APP)
    assert stored(server, topic) == 2
    wrong = {"access_key": APP["access_key"], "secret_key": "not-the-secret"}
    consumer = scripts.start(
        "acl", timeout=TIMEOUT, mode="consume", topic=topic, group=group, **wrong
    )
    consumer.wait_for(
        "a refusal reported by ali-ons",
        lambda events: [
            e
            for e in events
            if e["event"] in ("client_error", "fatal") and "signature" in json.dumps(e)
        ],
        TIMEOUT,
    )
    assert consumer.of_kind("received") == []
    consumer.stop()
