"""The auth hook of the JSON API: who is calling, and may they do this?

One hook for every route (``AccessHook.caller``), so reads and writes are
judged in one place:

* access control off (the broker has no ``acl_file`` and no
  ``auth_enabled``): everything is open, as the broker's own ports are;
* on: every ``/api`` call except ``/api/health`` needs HTTP Basic
  credentials, the access key as the user name and the secret key as the
  password, checked against the broker's gate: an account of the policy
  file, or a RocketMQ 5 user (enabled). A read needs any such account
  (message bodies are data, and reads cost the cluster work); a write
  (create/update/delete a topic, send, reset an offset, resend a dead
  letter, recall a timer) needs an admin: a file account with
  ``admin: true`` or a Super user. 401 when credentials are missing or
  wrong, 403 when they are not an admin's.

Globally white addresses of the file are not honoured here: a browser's
address says little about who sits at it, and the page asks once.

The remoting requests made for a caller are signed with the caller's own
credentials, so the broker's gate still judges each of them exactly as it
judges the CLI's: the hook never lends a caller more rights than the
account has.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass

from tidemq.acl.credentials import Credentials
from tidemq.acl.gate import AclGate
from tidemq.web.errors import ApiError

__all__ = ["AccessHook", "Caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    credentials: Credentials | None
    """What the remoting requests made for this caller are signed with (None: unsigned)."""
    admin: bool
    """May write."""
    name: str | None = None


OPEN = Caller(None, True)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic ...`` header; None without one;
    ApiError 401 when it is malformed."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise ApiError(401, f"use HTTP Basic credentials (access key, secret key), not {scheme}")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ApiError(401, "the Basic credentials are not base64 of user:password") from None
    user, colon, password = decoded.partition(":")
    if not colon or not user or not password:
        raise ApiError(401, "the Basic credentials need an access key and a secret key")
    return user, password


class AccessHook:
    """Judges each API call (see the module docstring)."""

    def __init__(self, gate: AclGate | None) -> None:
        self._gate = gate

    @property
    def on(self) -> bool:
        return self._gate is not None

    def caller(self, authorization: str | None, *, write: bool) -> Caller:
        """Who calls, when they may do it; else ApiError 401/403."""
        gate = self._gate
        if gate is None:
            return OPEN
        given = basic_credentials(authorization)
        if given is None:
            raise ApiError(
                401,
                "access control is on: give an access key and secret key (HTTP Basic)",
                "NO_ACCESS_KEY",
            )
        access_key, secret = given
        admin = self._verify(gate, access_key, secret)
        if admin is None:
            raise ApiError(401, "unknown access key or wrong secret key", "BAD_CREDENTIALS")
        if write and not admin:
            raise ApiError(
                403,
                f"{access_key} is not an admin: changes need an admin account "
                "(admin: true in the ACL file, or a Super user)",
                "NOT_ADMIN",
            )
        return Caller(Credentials(access_key, secret), admin, access_key)

    @staticmethod
    def _verify(gate: AclGate, access_key: str, secret: str) -> bool | None:
        """Whether the account is an admin; None when the key or secret is wrong."""
        policy = gate.policy
        owned = policy.account(access_key)
        if owned is not None:
            if not _same(secret, owned.account.secret_key):
                return None
            return owned.account.admin
        user = policy.user(access_key)
        if user is None or not user.enabled or not _same(secret, user.password):
            return None
        return user.is_super
