"""The broker's answers to RocketMQ 5's user and ACL admin requests (codes 3001-3010).

Numbers, header fields and bodies are RocketMQ's (apache/rocketmq,
5.3.0 on, read at rocketmq-all-5.3.3: ``remoting/.../protocol/RequestCode.java``
AUTH_CREATE_USER 3001 ... AUTH_LIST_ACL 3010; ``remoting/.../protocol/header/``
{Create,Update,Delete,Get}UserRequestHeader ``username``,
ListUsersRequestHeader ``filter``, {Create,Update,Get}AclRequestHeader
``subject``, DeleteAclRequestHeader ``subject``, ``policyType``,
``resource``, ListAclsRequestHeader ``subjectFilter``, ``resourceFilter``;
bodies ``remoting/.../protocol/body/UserInfo.java`` and ``AclInfo.java`` as
JSON), so RocketMQ's admin tools can drive it. An answer never carries a
password (RocketMQ's does: ``UserConverter.convertUser`` copies it).

The failures answer what RocketMQ's broker answers, code and remark
(rocketmq-all-5.3.3 ``broker/.../processor/AdminBrokerProcessor.java``
createUser ... listAcl and handleAuthException; the managers' texts from
``AuthenticationMetadataManagerImpl`` / ``AuthorizationMetadataManagerImpl``):

==========================================  ==================  ==============================
case                                        code                remark
==========================================  ==================  ==============================
blank username (create, update, get)        INVALID_PARAMETER   The username is blank
create a user that exists                   NO_PERMISSION       The user is existed
create without a password                   NO_PERMISSION       password can not be blank
update a user that does not exist           NO_PERMISSION       The user is not exist
delete a user that does not exist           SUCCESS             (tidemq: a remark saying so)
get a user that does not exist              SUCCESS, no body
ACL for a user that does not exist          NO_PERMISSION       The subject of User:U is not exist.
delete/get the ACL of a missing user        NO_PERMISSION       The subject is not exist.
delete an ACL that does not exist           NO_PERMISSION       The acl is not exist.
get an ACL that does not exist              SUCCESS, no body
an ACL body without policies                SYSTEM_ERROR        The body of acl is null
a body that is not JSON                     SYSTEM_ERROR        (Java: the parser's exception)
a bad entry, type or status                 NO_PERMISSION       (tidemq's text, naming the value)
Super user made, changed or deleted by      SYSTEM_ERROR (make  The super user can only be
a caller that is not a Super user           or promote), else   create|update by super user
                                            NO_PERMISSION
==========================================  ==================  ==============================

The Super rule (``isNotSuperUserLogin``) keeps a user granted ``Update`` on
``Cluster`` from making itself a Super user. The caller is Super when
`is_super` says so for its ``AccessKey`` (the broker: a Super user, or a
plain_acl.yml ``admin: true`` account, which RocketMQ's migration makes
Super, ``auth/.../migration/AuthMigrator.java``); a request without an
``AccessKey`` is, as in Java (access control is off). tidemq's own rule,
the last enabled Super user stays, refuses with NO_PERMISSION. Who may send
these codes at all is the gate's business (admin-only codes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tidemq.acl.auth_model import (
    Acl,
    AuthModelError,
    PolicyEntry,
    User,
    UserStatus,
    UserType,
    subject_of,
)
from tidemq.acl.auth_store import AclNotFound, AuthStore, UserExists, UserNotFound
from tidemq.acl.signing import ACCESS_KEY
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import Connection, Handler

__all__ = ["AuthAdmin"]

BLANK_USERNAME = "The username is blank"
USER_EXISTS = "The user is existed"
USER_MISSING = "The user is not exist"
SUBJECT_MISSING = "The subject is not exist."
ACL_MISSING = "The acl is not exist."
NO_POLICIES = "The body of acl is null"
SUPER_CREATE = "The super user can only be create by super user"
SUPER_UPDATE = "The super user can only be update by super user"


class _Refused(Exception):
    """An answer other than SUCCESS: its code and remark."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class _Done:
    """A SUCCESS with a remark (and no body)."""

    def __init__(self, remark: str) -> None:
        self.remark = remark


_Answer = Callable[[Mapping[str, str], bytes, bool], Any]


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise _Refused(ResponseCode.SYSTEM_ERROR, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise _Refused(ResponseCode.SYSTEM_ERROR, "the body is not a JSON object")
    return data


def _entries(body: bytes) -> list[PolicyEntry]:
    policies = _json_body(body).get("policies")
    if not policies:
        raise _Refused(ResponseCode.SYSTEM_ERROR, NO_POLICIES)
    if not isinstance(policies, list):
        raise AuthModelError("policies must be a list")
    entries: list[PolicyEntry] = []
    for policy in policies:
        listed = policy.get("entries") if isinstance(policy, dict) else None
        if not listed:
            raise AuthModelError("The policy entries is empty.")
        entries.extend(PolicyEntry.from_json(e) for e in listed)
    return entries


def _subject(header: Mapping[str, str], body: bytes = b"") -> str:
    subject = header.get("subject") or str(_json_body(body).get("subject") or "")
    if not subject:
        raise AuthModelError("The subject is null.")
    return subject_of(subject)


def _username(header: Mapping[str, str], data: Mapping[str, Any] | None = None) -> str:
    name = header.get("username") or str((data or {}).get("username") or "")
    if not name.strip():
        raise _Refused(ResponseCode.INVALID_PARAMETER, BLANK_USERNAME)
    return name


def _enum_or_none(kind: Any, value: Any, what: str) -> Any:
    if value in (None, ""):
        return None
    for member in kind:
        if member.value.lower() == str(value).lower():
            return member
    names = ", ".join(m.value for m in kind)
    raise AuthModelError(f"bad {what} {value!r}: expected one of {names}")


def _no_permission(remark: str) -> _Refused:
    return _Refused(ResponseCode.NO_PERMISSION, remark)


class AuthAdmin:
    """Request handlers over one AuthStore."""

    def __init__(self, store: AuthStore, is_super: Callable[[str], bool] | None = None) -> None:
        """`is_super(access_key)`: whether the caller signing with it is a Super user
        (None: every caller is, as when access control is off)."""
        self.store = store
        self.is_super = is_super

    def handlers(self) -> dict[int, Handler]:
        answers: dict[RequestCode, _Answer] = {
            RequestCode.AUTH_CREATE_USER: self._create_user,
            RequestCode.AUTH_UPDATE_USER: self._update_user,
            RequestCode.AUTH_DELETE_USER: self._delete_user,
            RequestCode.AUTH_GET_USER: self._get_user,
            RequestCode.AUTH_LIST_USER: self._list_users,
            RequestCode.AUTH_CREATE_ACL: self._create_acl,
            RequestCode.AUTH_UPDATE_ACL: self._update_acl,
            RequestCode.AUTH_DELETE_ACL: self._delete_acl,
            RequestCode.AUTH_GET_ACL: self._get_acl,
            RequestCode.AUTH_LIST_ACL: self._list_acls,
        }
        return {int(code): self._handler(answer) for code, answer in answers.items()}

    def _caller_is_super(self, fields: Mapping[str, str]) -> bool:
        access_key = fields.get(ACCESS_KEY)
        return not access_key or self.is_super is None or self.is_super(access_key)

    def _handler(self, answer: _Answer) -> Handler:
        async def handle(request: RemotingCommand, connection: Connection) -> RemotingCommand:
            fields = request.ext_fields or {}
            try:
                result = answer(fields, request.body, self._caller_is_super(fields))
            except _Refused as refused:
                return RemotingCommand.response_to(request, refused.code, refused.remark)
            except (AuthModelError, AttributeError, TypeError) as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.NO_PERMISSION, str(exc)[:300] or "bad request"
                )
            if isinstance(result, _Done):
                return RemotingCommand.response_to(request, ResponseCode.SUCCESS, result.remark)
            body = b"" if result is None else json.dumps(result).encode()
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

        return handle

    # -- users ---------------------------------------------------------------------------

    def _create_user(self, header: Mapping[str, str], body: bytes, by_super: bool) -> None:
        data = _json_body(body)
        data["username"] = _username(header, data)
        if not str(data.get("password") or "").strip():
            raise _no_permission("password can not be blank")
        user = User.from_json(data)
        if user.is_super and not by_super:
            raise _Refused(ResponseCode.SYSTEM_ERROR, SUPER_CREATE)
        try:
            self.store.create_user(user)
        except UserExists:
            raise _no_permission(USER_EXISTS) from None

    def _update_user(self, header: Mapping[str, str], body: bytes, by_super: bool) -> None:
        data = _json_body(body)
        username = _username(header, data)
        user_type = _enum_or_none(UserType, data.get("userType"), "user type")
        status = _enum_or_none(UserStatus, data.get("userStatus"), "user status")
        if user_type is UserType.SUPER and not by_super:
            raise _Refused(ResponseCode.SYSTEM_ERROR, SUPER_UPDATE)
        old = self.store.state.user(username)
        if old is None:
            raise _no_permission(USER_MISSING)
        if old.is_super and not by_super:
            raise _no_permission(SUPER_UPDATE)
        self.store.update_user(
            username, password=data.get("password") or None, user_type=user_type, status=status
        )

    def _delete_user(self, header: Mapping[str, str], body: bytes, by_super: bool) -> _Done | None:
        username = header.get("username") or ""
        if not username.strip():
            raise _no_permission("username can not be blank")
        old = self.store.state.user(username)
        if old is None:
            return _Done(f"user {username} does not exist: nothing deleted")
        if old.is_super and not by_super:
            raise _no_permission(SUPER_UPDATE)
        self.store.delete_user(username)
        return None

    def _get_user(
        self, header: Mapping[str, str], body: bytes, by_super: bool
    ) -> dict[str, Any] | None:
        user = self.store.state.user(_username(header))
        return None if user is None else user.to_json(with_password=False)

    def _list_users(
        self, header: Mapping[str, str], body: bytes, by_super: bool
    ) -> list[dict[str, Any]]:
        users = self.store.list_users(header.get("filter"))
        return [u.to_json(with_password=False) for u in users]

    # -- ACLs ----------------------------------------------------------------------------

    def _write_acl(self, header: Mapping[str, str], body: bytes) -> None:
        subject = _subject(header, body)
        entries = _entries(body)
        try:
            self.store.create_acl(subject, entries)
        except UserNotFound:
            raise _no_permission(f"The subject of {subject} is not exist.") from None

    def _create_acl(self, header: Mapping[str, str], body: bytes, by_super: bool) -> None:
        self._write_acl(header, body)

    def _update_acl(self, header: Mapping[str, str], body: bytes, by_super: bool) -> None:
        self._write_acl(header, body)  # RocketMQ: the same merge, made if missing

    def _delete_acl(self, header: Mapping[str, str], body: bytes, by_super: bool) -> None:
        subject = _subject(header)
        resource = header.get("resource")
        try:
            self.store.delete_acl(subject, [resource] if resource else [])
        except UserNotFound:
            raise _no_permission(SUBJECT_MISSING) from None
        except AclNotFound:
            raise _no_permission(ACL_MISSING) from None

    def _get_acl(
        self, header: Mapping[str, str], body: bytes, by_super: bool
    ) -> dict[str, Any] | None:
        subject = _subject(header)
        if self.store.state.user(subject.partition(":")[2]) is None:
            raise _no_permission(SUBJECT_MISSING)
        try:
            return self.store.get_acl(subject).to_json()
        except AclNotFound:
            return None

    def _list_acls(
        self, header: Mapping[str, str], body: bytes, by_super: bool
    ) -> list[dict[str, Any]]:
        acls: list[Acl] = self.store.list_acls(
            header.get("subjectFilter"), header.get("resourceFilter")
        )
        return [a.to_json() for a in acls]
