"""The official Node 5.x client's ACL scenario (js/official_node_acl.js), run
against a server with ACLs: it sends, receives and acks with the keys given,
then tries without credentials, with a wrong secret, and on a denied topic.
Shared by the ACL 1.0 (plain_acl.yml) and the RocketMQ 5 users interop tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ali_ons_harness import NODE_MODULES, Event

NODE_SCRIPT = Path(__file__).with_name("js") / "official_node_acl.js"


def official_node_acl(
    endpoints: str,
    topic: str,
    group: str,
    denied_topic: str,
    access_key: str,
    secret_key: str,
    home: Path,
) -> Event:
    """Run the scenario; check what every server with ACLs answers alike (the
    allowed round trip; UNAUTHORIZED 40100 without credentials and with a wrong
    secret; FORBIDDEN 40300 on `denied_topic`) and return the events by name,
    for the caller to check the denial's remark."""
    if not (NODE_MODULES / "rocketmq-client-nodejs").exists():
        pytest.fail("interop/node_modules is missing: run `make test`", pytrace=False)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), HOME=str(home))
    node = shutil.which("node") or "node"
    args = ["--endpoints", endpoints, "--topic", topic, "--group", group]
    args += ["--denied-topic", denied_topic, "--access-key", access_key, "--secret-key", secret_key]
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
    assert f"Check signature failed for accessKey={access_key}" in wrong["message"]
    assert (denied["name"], denied["code"]) == ("ForbiddenException", 40300), denied
    return by_event
