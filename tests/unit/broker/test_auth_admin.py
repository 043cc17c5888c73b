"""The broker's answers to RocketMQ 5's user and ACL admin codes (3001-3010): RocketMQ's
header fields and JSON bodies in, its response codes and remarks out (rocketmq-all-5.3.3
AdminBrokerProcessor and the auth managers), never a password."""

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

SUPERS = {"root", "fileAdmin"}


class Admin:
    def __init__(self, path: Path) -> None:
        self.store = AuthStore(path)
        self.handlers = AuthAdmin(self.store, SUPERS.__contains__).handlers()

    def __call__(
        self, code: RequestCode, header: dict[str, str], body: Any = None, *, caller: str = ""
    ) -> RemotingCommand:
        """`caller`: the AccessKey the request carries ("": none, access control off)."""
        data = b"" if body is None else json.dumps(body).encode()
        fields = {**header, **({"AccessKey": caller} if caller else {})}
        request = RemotingCommand.request(int(code), fields, data)
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
    assert (again.code, again.remark) == (ResponseCode.NO_PERMISSION, "The user is existed")
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
    assert (missing.code, missing.body) == (ResponseCode.SUCCESS, b"")  # RocketMQ: no body
    deleted = admin(RequestCode.AUTH_DELETE_USER, {"username": "alice"})
    assert (deleted.code, deleted.remark) == (ResponseCode.SUCCESS, None)
    again = admin(RequestCode.AUTH_DELETE_USER, {"username": "alice"})
    assert again.code == ResponseCode.SUCCESS  # RocketMQ: nothing to delete is no error
    assert again.remark == "user alice does not exist: nothing deleted"


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
    assert (gone.code, gone.body) == (ResponseCode.SUCCESS, b"")  # RocketMQ: no body


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
    assert response is not None
    assert response.code in (ResponseCode.SYSTEM_ERROR, ResponseCode.NO_PERMISSION)
    assert response.remark
    assert admin.store.state.acls == {}


ALICE = {"username": "alice", "password": "aliceSecret1"}
ENTRY = {"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow"}


def acl_body(subject: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"subject": subject, "policies": [{"policyType": "Custom", "entries": list(entries)}]}


@pytest.mark.parametrize(
    "code, header, body, expected",
    [
        (RequestCode.AUTH_CREATE_USER, {}, {"password": "x1234567"}, (29, "The username is blank")),
        (RequestCode.AUTH_UPDATE_USER, {"username": " "}, {}, (29, "The username is blank")),
        (RequestCode.AUTH_GET_USER, {}, None, (29, "The username is blank")),
        (RequestCode.AUTH_DELETE_USER, {}, None, (16, "username can not be blank")),
        (RequestCode.AUTH_CREATE_USER, {"username": "bob"}, {}, (16, "password can not be blank")),
        (RequestCode.AUTH_UPDATE_USER, {"username": "bob"}, {}, (16, "The user is not exist")),
        (
            RequestCode.AUTH_CREATE_ACL,
            {"subject": "User:bob"},
            acl_body("User:bob", ENTRY),
            (16, "The subject of User:bob is not exist."),
        ),
        (
            RequestCode.AUTH_UPDATE_ACL,
            {"subject": "User:bob"},
            acl_body("User:bob", ENTRY),
            (16, "The subject of User:bob is not exist."),
        ),
        (
            RequestCode.AUTH_DELETE_ACL,
            {"subject": "User:bob"},
            None,
            (16, "The subject is not exist."),
        ),
        (
            RequestCode.AUTH_GET_ACL,
            {"subject": "User:bob"},
            None,
            (16, "The subject is not exist."),
        ),
        (
            RequestCode.AUTH_DELETE_ACL,
            {"subject": "User:alice"},
            None,
            (16, "The acl is not exist."),
        ),
        (
            RequestCode.AUTH_CREATE_ACL,
            {"subject": "User:alice"},
            {},
            (1, "The body of acl is null"),
        ),
        (
            RequestCode.AUTH_CREATE_ACL,
            {"subject": "User:alice"},
            acl_body("User:alice"),
            (16, "The policy entries is empty."),
        ),
        (
            RequestCode.AUTH_UPDATE_USER,
            {"username": "alice"},
            {"userType": "Root"},
            (16, "bad user type 'Root': expected one of Super, Normal"),
        ),
    ],
)
def test_failures_answer_rocketmqs_code_and_remark(
    admin: Admin,
    code: RequestCode,
    header: dict[str, str],
    body: Any,
    expected: tuple[int, str],
) -> None:
    admin(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, ALICE)
    before = admin.store.state
    response = admin(code, header, body)
    assert (response.code, response.remark) == expected
    assert admin.store.state == before  # a refusal changes nothing


def test_update_acl_makes_a_missing_acl_as_rocketmq_does(admin: Admin) -> None:
    admin(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, ALICE)
    header = {"subject": "User:alice"}
    assert admin(RequestCode.AUTH_UPDATE_ACL, header, acl_body("User:alice", ENTRY)).code == 0
    other = {**ENTRY, "resource": "Topic:b"}
    assert admin(RequestCode.AUTH_CREATE_ACL, header, acl_body("User:alice", other)).code == 0
    got = json.loads(admin(RequestCode.AUTH_GET_ACL, header).body)
    assert [e["resource"] for e in got["policies"][0]["entries"]] == ["Topic:a", "Topic:b"]


def test_only_a_super_user_makes_changes_or_deletes_super_users(admin: Admin) -> None:
    root = {"username": "root", "password": "rootSecret1", "userType": "Super"}
    assert admin(RequestCode.AUTH_CREATE_USER, {"username": "root"}, root, caller="root").code == 0
    admin(RequestCode.AUTH_CREATE_USER, {"username": "alice"}, ALICE, caller="root")
    # alice (say, granted Update on Cluster) may manage Normal users, not Super ones
    mallory = {"username": "mallory", "password": "mallory01", "userType": "Super"}
    made = admin(RequestCode.AUTH_CREATE_USER, {"username": "mallory"}, mallory, caller="alice")
    assert (made.code, made.remark) == (1, "The super user can only be create by super user")
    promote = {"userType": "Super"}
    raised = admin(RequestCode.AUTH_UPDATE_USER, {"username": "alice"}, promote, caller="alice")
    assert (raised.code, raised.remark) == (1, "The super user can only be update by super user")
    demote = {"userType": "Normal"}
    changed = admin(RequestCode.AUTH_UPDATE_USER, {"username": "root"}, demote, caller="alice")
    assert (changed.code, changed.remark) == (16, "The super user can only be update by super user")
    gone = admin(RequestCode.AUTH_DELETE_USER, {"username": "root"}, caller="alice")
    assert (gone.code, gone.remark) == (16, "The super user can only be update by super user")
    assert admin.store.get_user("root").is_super and admin.store.state.user("mallory") is None
    bob = {"username": "bob", "password": "bobSecret1"}
    assert admin(RequestCode.AUTH_CREATE_USER, {"username": "bob"}, bob, caller="alice").code == 0
    # a Super user, a file admin account, or no AccessKey at all (access control off) may
    for caller in ("root", "fileAdmin", ""):
        name = f"super-{caller or 'anonymous'}"
        user = {"username": name, "password": "superSecret1", "userType": "Super"}
        assert (
            admin(RequestCode.AUTH_CREATE_USER, {"username": name}, user, caller=caller).code == 0
        )


def test_the_last_super_user_stays(admin: Admin) -> None:
    root = {"username": "root", "password": "rootSecret1", "userType": "Super"}
    admin(RequestCode.AUTH_CREATE_USER, {"username": "root"}, root)
    refused = admin(RequestCode.AUTH_DELETE_USER, {"username": "root"}, caller="root")
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "user root is the last enabled Super user: create another one first"
