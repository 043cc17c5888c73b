"""The broker's answers to RocketMQ 5's user and ACL admin requests (codes 3001-3010).

Numbers, header fields and bodies are RocketMQ's (apache/rocketmq,
5.3.0 on, read at HEAD: ``remoting/.../protocol/RequestCode.java`` AUTH_CREATE_USER
3001 ... AUTH_LIST_ACL 3010; ``remoting/.../protocol/header/``
{Create,Update,Delete,Get}UserRequestHeader ``username``,
ListUsersRequestHeader ``filter``, {Create,Update,Get}AclRequestHeader
``subject``, DeleteAclRequestHeader ``subject``, ``policyType``,
``resource``, ListAclsRequestHeader ``subjectFilter``, ``resourceFilter``;
bodies ``remoting/.../protocol/body/UserInfo.java`` and ``AclInfo.java`` as
JSON), so RocketMQ's admin tools can drive it. An answer never carries a
password. Who may send these is the gate's business (admin-only codes);
a missing user or ACL is USER_NOT_EXIST / POLICY_NOT_EXIST, any other
refusal INVALID_PARAMETER with the reason.
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
)
from tidemq.acl.auth_store import AclNotFound, AuthStore, UserNotFound
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import Connection, Handler

__all__ = ["AuthAdmin"]

_Answer = Callable[[Mapping[str, str], bytes], Any]


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise AuthModelError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise AuthModelError("the body is not a JSON object")
    return data


def _entries(body: bytes) -> list[PolicyEntry]:
    data = _json_body(body)
    entries: list[PolicyEntry] = []
    for policy in data.get("policies") or ():
        entries.extend(PolicyEntry.from_json(e) for e in policy.get("entries") or ())
    return entries


def _subject(header: Mapping[str, str], body: bytes) -> str:
    subject = header.get("subject") or str(_json_body(body).get("subject") or "")
    if not subject:
        raise AuthModelError("the subject is missing")
    return subject


def _enum_or_none(kind: Any, value: Any) -> Any:
    if value in (None, ""):
        return None
    for member in kind:
        if member.value.lower() == str(value).lower():
            return member
    raise AuthModelError(f"bad value {value!r}")


class AuthAdmin:
    """Request handlers over one AuthStore."""

    def __init__(self, store: AuthStore) -> None:
        self.store = store

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

    @staticmethod
    def _handler(answer: _Answer) -> Handler:
        async def handle(request: RemotingCommand, connection: Connection) -> RemotingCommand:
            try:
                result = answer(request.ext_fields or {}, request.body)
            except UserNotFound as exc:
                return RemotingCommand.response_to(request, ResponseCode.USER_NOT_EXIST, str(exc))
            except AclNotFound as exc:
                return RemotingCommand.response_to(request, ResponseCode.POLICY_NOT_EXIST, str(exc))
            except (AuthModelError, AttributeError, TypeError) as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.INVALID_PARAMETER, str(exc)[:300]
                )
            body = b"" if result is None else json.dumps(result).encode()
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

        return handle

    # -- users ---------------------------------------------------------------------------

    def _create_user(self, header: Mapping[str, str], body: bytes) -> None:
        data = _json_body(body)
        data.setdefault("username", header.get("username"))
        self.store.create_user(User.from_json(data))

    def _update_user(self, header: Mapping[str, str], body: bytes) -> None:
        data = _json_body(body)
        username = header.get("username") or str(data.get("username") or "")
        self.store.update_user(
            username,
            password=data.get("password") or None,
            user_type=_enum_or_none(UserType, data.get("userType")),
            status=_enum_or_none(UserStatus, data.get("userStatus")),
        )

    def _delete_user(self, header: Mapping[str, str], body: bytes) -> None:
        self.store.delete_user(header.get("username") or "")

    def _get_user(self, header: Mapping[str, str], body: bytes) -> dict[str, Any]:
        return self.store.get_user(header.get("username") or "").to_json(with_password=False)

    def _list_users(self, header: Mapping[str, str], body: bytes) -> list[dict[str, Any]]:
        users = self.store.list_users(header.get("filter"))
        return [u.to_json(with_password=False) for u in users]

    # -- ACLs ----------------------------------------------------------------------------

    def _create_acl(self, header: Mapping[str, str], body: bytes) -> None:
        self.store.create_acl(_subject(header, body), _entries(body))

    def _update_acl(self, header: Mapping[str, str], body: bytes) -> None:
        self.store.update_acl(_subject(header, body), _entries(body))

    def _delete_acl(self, header: Mapping[str, str], body: bytes) -> None:
        resource = header.get("resource")
        self.store.delete_acl(header.get("subject") or "", [resource] if resource else [])

    def _get_acl(self, header: Mapping[str, str], body: bytes) -> dict[str, Any]:
        return self.store.get_acl(header.get("subject") or "").to_json()

    def _list_acls(self, header: Mapping[str, str], body: bytes) -> list[dict[str, Any]]:
        acls: list[Acl] = self.store.list_acls(
            header.get("subjectFilter"), header.get("resourceFilter")
        )
        return [a.to_json() for a in acls]
