"""RocketMQ 5 users (``tidemq user create`` + ``tidemq acl create``) with real third-party
clients, against ``tidemq serve --auth`` (no policy file: the users alone).

A user is its name and password, used as access key and secret key, exactly as
RocketMQ 5.3 authenticates them (rocketmq-all-5.3.3 ``auth/.../authentication/
builder/DefaultAuthenticationContextBuilder.java``: a remoting request's
``AccessKey`` is the username and its ``Signature`` is checked with the user's
password by ``DefaultAuthenticationHandler``; over gRPC the ``Credential``):

* ali-ons (4.x remoting, ``accessKey``/``secretKey``) produces and consumes as the
  user; with a wrong password, or on a topic the user's ACL denies, it gets
  NO_PERMISSION (16) and nothing is stored;
* the official Node 5.x client (gRPC, ``sessionCredentials``) sends, receives and
  acks as the user; without credentials or with a wrong password it gets
  UNAUTHORIZED (40100), on the denied topic FORBIDDEN (40300), and nothing is
  stored.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ali_ons_harness import Event, TidemqServer, consume_both, unique
from node_acl_support import official_node_acl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the interop tests need Node.js >= 18",
    ),
]

ROOT = ("--access-key", "root", "--secret-key", "rootSecret01")
USER = {"access_key": "onsUser01", "secret_key": "onsUserSecret01"}
DENIED = "UsersDenied"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidemqServer]:
    """`tidemq serve --auth` with a Super user, and one Normal user made with the CLI:
    Pub and Sub on every topic but DENIED (a Deny on Pub), Sub on every group."""
    root = tmp_path_factory.mktemp("interop-users")
    srv = TidemqServer(root / "data", extra_args=("--auth-init-user", "root:rootSecret01"))
    try:
        srv.wait_ready()
        admin = ("--namesrv", srv.namesrv, *ROOT)
        name = USER["access_key"]
        acl = ("acl", "create", name, "--resource")
        for args in (
            ("user", "create", name, "--password", USER["secret_key"]),
            (*acl, "Topic:*", "--action", "Pub", "--action", "Sub"),
            (*acl, f"Topic:{DENIED}", "--action", "Pub", "--decision", "Deny"),
            (*acl, "Group:*", "--action", "Sub"),
            ("topic", "create", DENIED, "--queues", "2"),
        ):
            result = srv.cli(*args, *admin)
            assert result.returncode == 0, result.describe()
        yield srv
    finally:
        srv.stop()


def create(server: TidemqServer, topic: str) -> None:
    server.create_topic(topic, queues=2, auth=ROOT)


def stored(server: TidemqServer, topic: str) -> int:
    return server.stored(topic, auth=ROOT)


def test_ali_ons_as_a_user_produces_and_consumes(scripts, server: TidemqServer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("UsersOns"), unique("UsersGroup")
    create(server, topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=group, **USER)
    assert [e["label"] for e in producer.of_kind("sent")] == ["acl-0", "acl-1"], producer.describe()
    assert stored(server, topic) == 2
    consume_both(scripts, topic, group, TIMEOUT, **USER)


@pytest.mark.parametrize(
    ("case", "credentials", "remark"),
    [
        (
            "wrong password",
            {"access_key": USER["access_key"], "secret_key": "notThePassword1"},
            "Check signature failed for accessKey=onsUser01",
        ),
        (
            "denied topic",
            USER,
            f"User:onsUser01 has no permission to access Topic:{DENIED} from 127.0.0.1, "
            "the decision is deny.",
        ),
    ],
)
def test_ali_ons_as_a_user_is_refused_and_nothing_is_stored(  # type: ignore[no-untyped-def]
    scripts, server: TidemqServer, case: str, credentials: dict[str, str], remark: str
) -> None:
    topic = DENIED if case == "denied topic" else unique("UsersOns")
    if topic != DENIED:
        create(server, topic)
    before = stored(server, topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=unique("G"), **credentials)
    errors: list[Event] = [e for e in producer.events if e["event"] == "send_error"]
    assert [e["label"] for e in errors] == ["acl-0", "acl-1"], producer.describe()
    refusals = producer.of_kind("refusal")
    assert refusals, producer.describe()
    assert all(e["code"] == 16 and remark in e["message"] for e in refusals), refusals
    assert producer.of_kind("sent") == []
    assert stored(server, topic) == before


def test_the_official_node_client_as_a_user(server: TidemqServer, tmp_path: Path) -> None:
    topic, group = unique("UsersNode"), unique("UsersNodeG")
    create(server, topic)
    before = {name: stored(server, name) for name in (topic, DENIED)}
    by_event = official_node_acl(
        server.grpc, topic, group, DENIED, USER["access_key"], USER["secret_key"], tmp_path
    )
    assert (
        f"User:onsUser01 has no permission to access Topic:{DENIED} from 127.0.0.1, "
        "the decision is deny." in by_event["denied"]["message"]
    )
    after = {name: stored(server, name) for name in (topic, DENIED)}
    assert after == {topic: before[topic] + 1, DENIED: before[DENIED]}
