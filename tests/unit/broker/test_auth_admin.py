"""The broker's answers to RocketMQ 5's user and ACL admin codes (3001-3010): RocketMQ's
header fields and JSON bodies in, its response codes out, never a password."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tidemq.acl.auth_store import AuthStore
from tidemq.broker.auth_admin import AuthAdmin
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand


class Admin:
    def __init__(self, path: Path) -> None:
        self.store = AuthStore(path)
        self.handlers = AuthAdmin(self.store).handlers()

    def __call__(
        self, code: RequestCode, header: dict[str, str], body: Any = None
    ) -> RemotingCommand:
        data = b"" if body is None else json.dumps(body).encode()
        request = RemotingCommand.request(int(code), header, data)
        response = asyncio.run(self.handlers[int(code)](request, None))  # type: ignore[arg-type]
        assert response is not None
        return response


@pytest.fixture
def admin(tmp_path: Path) -> Admin:
    return Admin(tmp_path / "auth.json")


def test_the_codes_are_rocketmqs(admin: Admin) -> None:
    assert sorted(admin.handlers) == list(range(3001, 3011))


def test_users_round_trip_without_passwords(admin: Admin) -> None:
    user = {"username": "alice", "password": "aliceSecret1", "userType": "Normal"}
    ok = admin(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, user)
    assert ok.code == ResponseCode.SUCCESS
    again = admin(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, user)
    assert again.code == ResponseCode.INVALID_PARAMETER and "already exists" in (again.remark or "")
    update = {"username": "alice", "userStatus": "disable", "password": None}
    assert admin(RequestCode.AUTH_UPDATE_USER, {"username": "alice"}, update).code == 0
    got = admin(RequestCode.AUTH_GET_USER, {"username": "alice"})
    assert json.loads(got.body) == {
        "username": "alice",
        "userType": "Normal",
        "userStatus": "disable",
    }
    listed = admin(RequestCode.AUTH_LIST_USER, {"filter": "ali"})
    assert b"aliceSecret1" not in listed.body and len(json.loads(listed.body)) == 1
    assert json.loads(admin(RequestCode.AUTH_LIST_USER, {"filter": "bob"}).body) == []
    assert admin.store.get_user("alice").password == "aliceSecret1"  # kept
    missing = admin(RequestCode.AUTH_GET_USER, {"username": "bob"})
    assert missing.code == ResponseCode.USER_NOT_EXIST
    assert admin(RequestCode.AUTH_DELETE_USER, {"username": "alice"}).code == 0


def test_acls_round_trip(admin: Admin) -> None:
    admin(RequestCode.AUTH_CREATE_USER, {}, {"username": "alice", "password": "aliceSecret1"})
    entries = [
        {"resource": "Topic:a*", "actions": ["Pub"], "sourceIps": [], "decision": "Allow"},
        {"resource": "Group:g", "actions": ["Sub"], "decision": "Deny"},
    ]
    body = {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": entries}]}
    assert admin(RequestCode.AUTH_CREATE_ACL, {"subject": "User:alice"}, body).code == 0
    got = json.loads(admin(RequestCode.AUTH_GET_ACL, {"subject": "User:alice"}).body)
    assert [e["resource"] for e in got["policies"][0]["entries"]] == ["Topic:a*", "Group:g"]
    listed = admin(RequestCode.AUTH_LIST_ACL, {"resourceFilter": "Group"})
    assert [e["resource"] for e in json.loads(listed.body)[0]["policies"][0]["entries"]] == [
        "Group:g"
    ]
    header = {"subject": "User:alice", "resource": "Group:g"}
    assert admin(RequestCode.AUTH_DELETE_ACL, header).code == 0
    assert admin(RequestCode.AUTH_DELETE_ACL, {"subject": "User:alice"}).code == 0
    gone = admin(RequestCode.AUTH_GET_ACL, {"subject": "User:alice"})
    assert gone.code == ResponseCode.POLICY_NOT_EXIST


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"policies": [{"entries": [{"resource": "Queue:x", "actions": ["Pub"]}]}]}),
        json.dumps({"policies": [{"entries": [{"resource": "Topic:x", "actions": ["Fly"]}]}]}),
        json.dumps({"policies": "nope"}),
    ],
)
def test_a_bad_acl_body_is_a_clear_refusal(admin: Admin, body: Any) -> None:
    admin(RequestCode.AUTH_CREATE_USER, {}, {"username": "alice", "password": "aliceSecret1"})
    raw = body if isinstance(body, bytes) else body.encode()
    request = RemotingCommand.request(int(RequestCode.AUTH_CREATE_ACL), {"subject": "alice"}, raw)
    handler = admin.handlers[int(RequestCode.AUTH_CREATE_ACL)]
    response = asyncio.run(handler(request, None))  # type: ignore[arg-type]
    assert response is not None and response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark
