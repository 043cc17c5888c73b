"""ACL 1.0 on a remoting request: may this caller, from this address, do this?

The order of the checks, and the texts of the refusals, are RocketMQ's, so a
client that works (or is refused) against a RocketMQ broker with a given
``plain_acl.yml`` behaves the same here. Sources, apache/rocketmq tag
rocketmq-all-4.9.8 (identical in rocketmq-all-5.2.0):
``acl/.../plain/PlainPermissionManager.java`` (validate, checkPerm),
``acl/.../plain/PlainAccessValidator.java`` (parse: the client's address is
the text before the last ``:``; a request without ext fields only meets the
address rules; a parse failure is an AclException with its message),
``acl/.../plain/PlainAccessResource.java`` (printStr: ``topic:NAME`` /
``group:NAME``).

1. The resources the request needs are derived first (``resources``); a
   request Java cannot parse is refused whoever sends it.
2. A client in ``globalWhiteRemoteAddresses`` is admitted, signed or not.
3. ``AccessKey`` missing -> "No accessKey is configured"; unknown -> "No acl
   config for KEY".
4. A client matching its account's ``whiteRemoteAddress`` is admitted
   without a signature check (nor a permission check).
5. The ``Signature`` must be the secret key's -> "Check signature failed
   for accessKey=KEY".
6. PUB on RMQ_SYS_TRACE_TOPIC is admitted (message traces).
7. Admin-only codes (Java's, and an offset reset: ``TIDEMQ_ADMIN_CODES``)
   need ``admin: true``; an admin account without any
   ``topicPerms``/``groupPerms`` may then do anything (Java has no map to
   check); otherwise every resource needs its
   permission from ``topicPerms``/``groupPerms``, else from
   ``defaultTopicPerm``/``defaultGroupPerm`` (a ``%RETRY%G`` topic is group G)
   -> "No default permission for topic:T" (Java's text, used for both).

An access key the file does not know is looked up among the RocketMQ 5
users (``auth_model``, stored by the broker): "User:U is not found" is not
said, the file's "No acl config for KEY" is, since either model could have
known it; a disabled user is refused ("User:U is disabled.", apache/rocketmq
HEAD ``auth/.../authorization/chain/UserAuthorizationHandler.java``); the
signature is checked with the user's password exactly as with a secret key;
then ``auth_check.authorize_user`` judges the request by the user's ACL.
Globally white addresses admit before either model is asked.

A refusal never shows a secret; the access key (not secret, and what the
operator needs to see) is cut to 64 characters.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.heartbeat import HeartbeatData, parse_heartbeat

from .auth_check import admin_target, authorize_user, user_wants
from .auth_model import AuthState, User
from .denial import Denial, Reason
from .permissions import Permission, check_permission, needs_admin
from .plain_config import PlainAccessAccount, PlainAclConfig
from .remote_address import AddressMatcher, parse_pattern
from .resources import group_of_retry_topic, is_retry_topic, needed_permissions
from .signing import ACCESS_KEY, verify

__all__ = [
    "TIDEMQ_ADMIN_CODES",
    "AclPolicy",
    "Denial",
    "Reason",
    "check_perms",
    "client_host",
    "shown_key",
    "user_disabled",
    "validate",
]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""TopicValidator.RMQ_SYS_TRACE_TOPIC: a trace PUB skips the permission check."""

_SHOWN_KEY = 64

TIDEMQ_ADMIN_CODES = frozenset(
    {int(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)}
    | {int(code) for code in RequestCode if 3001 <= code <= 3010}
)
"""Admin-only here, not in ACL 1.0: Java's Permission.ADMIN_CODE leaves an offset
reset (222) to any signed account, with no group or topic check; RocketMQ's ACL
2.0 needs Update on the group and topic for it (HEAD,
``remoting/.../header/ResetOffsetRequestHeader.java``), which plain_acl.yml
cannot grant, so an admin account it is."""


@dataclass(frozen=True, slots=True)
class _Account:
    account: PlainAccessAccount
    addresses: AddressMatcher
    perms: Mapping[str, Permission]


class AclPolicy:
    """A checked ``plain_acl.yml``, compiled for lookups (PlainPermissionManager's tables)."""

    __slots__ = ("_accounts", "_global_white", "auth", "config")

    def __init__(self, config: PlainAclConfig, auth: AuthState | None = None) -> None:
        self.config = config
        self.auth = auth if auth is not None else AuthState()
        self._global_white = tuple(parse_pattern(p) for p in config.global_white_remote_addresses)
        self._accounts = {
            a.access_key: _Account(a, parse_pattern(a.white_remote_address), a.resource_perms())
            for a in config.accounts
        }

    def with_accounts(self, extra: Iterable[PlainAccessAccount]) -> AclPolicy:
        """This policy plus `extra` accounts (replacing any with the same key):
        a process's own internal account, which no file names."""
        added = {a.access_key: a for a in extra}
        if not added:
            return self
        kept = tuple(a for a in self.config.accounts if a.access_key not in added)
        config = dataclasses.replace(self.config, accounts=kept + tuple(added.values()))
        return AclPolicy(config, self.auth)

    def with_auth(self, auth: AuthState) -> AclPolicy:
        """This file's rules with `auth`'s users and ACLs (the RocketMQ 5 model)."""
        policy = copy.copy(self)
        policy.auth = auth
        return policy

    def user(self, access_key: str) -> User | None:
        """The RocketMQ 5 user signing as `access_key`, when the file has no such account."""
        return None if access_key in self._accounts else self.auth.user(access_key)

    def globally_white(self, host: str) -> bool:
        return any(matcher.matches(host) for matcher in self._global_white)

    def account(self, access_key: str) -> _Account | None:
        return self._accounts.get(access_key)


def client_host(remote: str) -> str:
    """The address a pattern is matched against: no scope, IPv4-mapped as IPv4
    (a dual-stack listener sees ``::ffff:10.0.0.1`` where Java sees ``10.0.0.1``)."""
    host = remote.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def shown_key(access_key: str) -> str:
    """An access key as a remark shows it: cut to 64 characters, escaped."""
    return _shown(access_key)


def _shown(access_key: str) -> str:
    text = access_key if len(access_key) <= _SHOWN_KEY else access_key[:_SHOWN_KEY] + "..."
    return text.encode("unicode_escape").decode("ascii")


def _printed(resource: str) -> str:
    """PlainAccessResource.printStr."""
    if is_retry_topic(resource):
        return f"group:{group_of_retry_topic(resource)}"
    return f"topic:{resource}"


def _needs(request: RemotingCommand) -> list[tuple[str, Permission]]:
    ext = request.ext_fields or None  # Java: no extFields -> only the address rules
    heartbeat: HeartbeatData | None = None
    if ext is not None and request.code == RequestCode.HEART_BEAT and request.body:
        heartbeat = parse_heartbeat(request.body)
    return needed_permissions(request.code, ext, heartbeat)


def validate(
    policy: AclPolicy, request: RemotingCommand, host: str, *, require_admin: bool = False
) -> Denial | None:
    """None when `request` from `host` (``client_host``) is admitted, else why not.
    `require_admin` treats the request's code as admin-only (tidemq's own rules,
    see ``TIDEMQ_ADMIN_CODES`` and the name server's writes)."""
    try:
        needed = _needs(request)
    except (ValueError, RecursionError) as exc:
        return Denial(Reason.BAD_REQUEST, str(exc)[:300] or "the request cannot be read")
    if policy.globally_white(host):
        return None
    access_key = request.ext_fields.get(ACCESS_KEY) if request.ext_fields else None
    if access_key is None:
        return Denial(Reason.NO_ACCESS_KEY, "No accessKey is configured")
    owned = policy.account(access_key)
    user = policy.user(access_key) if owned is None else None
    if owned is None and user is None:
        return Denial(Reason.UNKNOWN_ACCESS_KEY, f"No acl config for {_shown(access_key)}")
    if owned is not None and owned.addresses.matches(host):
        return None
    if user is not None and not user.enabled:
        return user_disabled(user)
    secret = owned.account.secret_key if owned is not None else _password(user)
    if not verify(request.ext_fields, request.body, secret, request_version=request.version):
        return Denial(
            Reason.BAD_SIGNATURE, f"Check signature failed for accessKey={_shown(access_key)}"
        )
    admin_only = require_admin or needs_admin(request.code) or request.code in TIDEMQ_ADMIN_CODES
    if user is not None:
        if not admin_only:
            try:
                wants = user_wants(request.code, request.ext_fields, needed, request.body)
            except ValueError as exc:
                return Denial(Reason.BAD_REQUEST, str(exc)[:300])
            return authorize_user(policy.auth, user, needed, host, wants=wants)
        target = admin_target(request.code, request.ext_fields)
        return authorize_user(
            policy.auth, user, needed, host, admin_code=request.code, admin_resource=target
        )
    assert owned is not None
    return check_perms(needed, owned, admin_only=admin_only, code=request.code)


def _password(user: User | None) -> str:
    assert user is not None  # validate returned for an unknown key
    return user.password


def user_disabled(user: User) -> Denial:
    """UserAuthorizationHandler's refusal of a disabled user."""
    return Denial(Reason.USER_DISABLED, f"User:{_shown(user.username)} is disabled.")


def check_perms(
    needed: list[tuple[str, Permission]],
    owned: _Account,
    *,
    admin_only: bool = False,
    code: int | None = None,
) -> Denial | None:
    """From step 6 on: the trace topic, then PlainPermissionManager.checkPerm
    (`admin_only`: the request needs an admin account; `code` names it in the remark)."""
    if dict(needed).get(TRACE_TOPIC) == Permission.PUB:
        return None
    account = owned.account
    if admin_only and not account.admin:
        return Denial(
            Reason.NOT_ADMIN,
            f"Need admin permission for request code={code}, "
            f"but accessKey={_shown(account.access_key)} is not",
        )
    if account.admin and not owned.perms:
        return None  # Java: an admin without topicPerms/groupPerms has no map to check
    for resource, perm in needed:
        granted = owned.perms.get(resource)
        if granted is None:
            is_group = is_retry_topic(resource)
            granted = account.default_group_perm if is_group else account.default_topic_perm
        if not check_permission(perm, granted):
            return Denial(Reason.NO_PERMISSION, f"No default permission for {_printed(resource)}")
    return None
