"""The API's auth hook: open without access control; with it, reads need a
known account and its secret, writes an admin (file admin or Super user)."""

from __future__ import annotations

import base64

import pytest

from tidemq.acl.auth_model import AuthState, User, UserStatus, UserType
from tidemq.acl.gate import AclGate
from tidemq.acl.plain_config import PlainAccessAccount, PlainAclConfig
from tidemq.acl.validator import AclPolicy
from tidemq.web.access import AccessHook, basic_credentials
from tidemq.web.errors import ApiError


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def hook() -> AccessHook:
    config = PlainAclConfig(
        accounts=(
            PlainAccessAccount("admin-key", "admin-secret", admin=True),
            PlainAccessAccount("reader-key", "reader-secret"),
        )
    )
    users = {
        "root": User("root", "root-pass", UserType.SUPER),
        "alice": User("alice", "alice-pass"),
        "gone": User("gone", "gone-pass", UserType.SUPER, UserStatus.DISABLE),
    }
    return AccessHook(AclGate(AclPolicy(config, AuthState(users))))


def test_without_access_control_everything_is_open() -> None:
    open_hook = AccessHook(None)
    caller = open_hook.caller(None, write=True)
    assert caller.admin and caller.credentials is None
    assert not open_hook.on


@pytest.mark.parametrize(
    ("user", "password", "admin"),
    [("admin-key", "admin-secret", True), ("reader-key", "reader-secret", False),
     ("root", "root-pass", True), ("alice", "alice-pass", False)],
)  # fmt: skip
def test_a_known_account_may_read_and_signs_as_itself(
    hook: AccessHook, user: str, password: str, admin: bool
) -> None:
    caller = hook.caller(basic(user, password), write=False)
    assert caller.admin is admin
    assert caller.credentials is not None
    assert (caller.credentials.access_key, caller.credentials.secret_key) == (user, password)


@pytest.mark.parametrize(
    ("user", "password"), [("admin-key", "admin-secret"), ("root", "root-pass")]
)
def test_an_admin_may_write(hook: AccessHook, user: str, password: str) -> None:
    assert hook.caller(basic(user, password), write=True).admin


@pytest.mark.parametrize(
    ("user", "password"), [("reader-key", "reader-secret"), ("alice", "alice-pass")]
)
def test_a_non_admin_may_not_write(hook: AccessHook, user: str, password: str) -> None:
    with pytest.raises(ApiError) as refused:
        hook.caller(basic(user, password), write=True)
    assert refused.value.status == 403
    assert "not an admin" in refused.value.message


@pytest.mark.parametrize(
    "header",
    [None, basic("admin-key", "wrong"), basic("nobody", "x"), basic("gone", "gone-pass"),
     "Bearer token", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()],
)  # fmt: skip
def test_missing_or_wrong_credentials_are_401(hook: AccessHook, header: str | None) -> None:
    with pytest.raises(ApiError) as refused:
        hook.caller(header, write=False)
    assert refused.value.status == 401


def test_basic_credentials_keep_a_colon_in_the_password() -> None:
    assert basic_credentials(basic("k", "a:b")) == ("k", "a:b")
    assert basic_credentials("") is None
