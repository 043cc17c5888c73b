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

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ali_ons_harness import NODE_MODULES, Event, TidemqServer, unique

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
NODE_SCRIPT = Path(__file__).with_name("js") / "official_node_acl.js"


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
    result = server.cli(
        "topic", "create", topic, "--queues", "2", "--namesrv", server.namesrv, *ROOT
    )
    assert result.returncode == 0, result.describe()


def stored(server: TidemqServer, topic: str) -> int:
    args = ("topic", "status", topic, "--json", "--namesrv", server.namesrv, *ROOT)
    result = server.cli(*args)
    assert result.returncode == 0, result.describe()
    return sum(int(queue["max_offset"]) for queue in json.loads(result.stdout))


def test_ali_ons_as_a_user_produces_and_consumes(scripts, server: TidemqServer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("UsersOns"), unique("UsersGroup")
    create(server, topic)
    producer = scripts.run("acl", timeout=TIMEOUT, topic=topic, group=group, **USER)
    assert [e["label"] for e in producer.of_kind("sent")] == ["acl-0", "acl-1"], producer.describe()
    assert stored(server, topic) == 2
    consumer = scripts.start(
        "acl", timeout=TIMEOUT, mode="consume", topic=topic, group=group, **USER
    )
    consumer.wait_for(
        "both deliveries",
        lambda events: (
            {e["label"] for e in events if e["event"] == "received"} >= {"acl-0", "acl-1"}
        ),
        TIMEOUT,
    )
    consumer.stop()
    consumer.wait_exit(TIMEOUT)


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
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    topic, group = unique("UsersNode"), unique("UsersNodeG")
    create(server, topic)
    before = {name: stored(server, name) for name in (topic, DENIED)}
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(tmp_path))
    node = shutil.which("node") or "node"
    args = ["--endpoints", server.grpc, "--topic", topic, "--group", group]
    args += ["--denied-topic", DENIED]
    args += ["--access-key", USER["access_key"], "--secret-key", USER["secret_key"]]
    done = subprocess.run(
        [node, str(NODE_SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
    by_event = {e["event"]: e for e in events}
    assert by_event["received"]["body"] == "node allowed"
    assert by_event["acked"]["messageId"] == by_event["sent"]["messageId"]
    assert by_event["empty-after-ack"]["count"] == 0
    anonymous, wrong, denied = by_event["anonymous"], by_event["wrong-key"], by_event["denied"]
    assert (anonymous["name"], anonymous["code"]) == ("UnauthorizedException", 40100), anonymous
    assert "No accessKey is configured" in anonymous["message"]
    assert (wrong["name"], wrong["code"]) == ("UnauthorizedException", 40100), wrong
    assert "Check signature failed for accessKey=onsUser01" in wrong["message"]
    assert (denied["name"], denied["code"]) == ("ForbiddenException", 40300), denied
    assert (
        f"User:onsUser01 has no permission to access Topic:{DENIED} from 127.0.0.1, "
        "the decision is deny." in denied["message"]
    )
    after = {name: stored(server, name) for name in (topic, DENIED)}
    assert after == {topic: before[topic] + 1, DENIED: before[DENIED]}
