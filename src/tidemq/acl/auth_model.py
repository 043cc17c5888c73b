"""The RocketMQ 5 access model: users, and ACLs of policy entries, with the deciding rule.

A user (username = access key, password = secret key) is Super (may do
anything) or Normal, enabled or disabled. An ACL gives one subject
(``User:NAME``) policy entries: a resource, the actions it covers, optional
source IPs, and a decision, Allow or Deny.

Which entry decides, for one resource and action: of the entries matching
the resource, the action and the caller's address, the most specific
resource wins (a literal name, then the longest prefix, then ``*``); between
equally specific entries Deny wins over Allow. No matching entry refuses.
That is RocketMQ's rule (apache/rocketmq, the auth module of 5.3.0 on, read at HEAD):
``auth/.../authorization/chain/AclAuthorizationHandler.java``
(matchPolicyEntries, comparePolicyEntries), ``auth/.../authorization/model/
PolicyEntry.java`` (isMatchAction: an entry with ``All`` covers every
action, a request for ``Any`` is met by any entry), ``.../model/Resource.java``
(parseResource: ``*`` any resource, ``Topic:*`` any topic, ``Topic:ab*`` a
prefix, else a literal name), ``common/.../action/Action.java`` (the names).
The JSON shapes are RocketMQ's admin bodies: ``remoting/.../protocol/body/
UserInfo.java`` and ``AclInfo.java`` (subject, policies of policyType and
entries of resource, actions, sourceIps, decision).

tidemq accepts a bare ``Cluster`` as ``Cluster:*`` (the issue's spelling).
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Acl",
    "Action",
    "AuthModelError",
    "AuthState",
    "Decision",
    "PolicyEntry",
    "Resource",
    "ResourcePattern",
    "User",
    "UserStatus",
    "UserType",
    "deciding_entry",
    "subject_of",
]

USER_SUBJECT_PREFIX = "User:"


class AuthModelError(ValueError):
    """A user, an ACL or one of their fields that cannot be used (the message says why)."""


def _by_name(kind: type[enum.Enum], text: str, what: str) -> Any:
    for member in kind:
        if member.value.lower() == text.strip().lower():
            return member
    names = ", ".join(m.value for m in kind)
    raise AuthModelError(f"bad {what} {text!r}: expected one of {names}")


class UserType(enum.Enum):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(enum.Enum):
    ENABLE = "enable"
    DISABLE = "disable"


class Action(enum.Enum):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"

    @classmethod
    def parse(cls, text: str) -> Action:
        return _by_name(cls, text, "action")  # type: ignore[no-any-return]


class Decision(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"

    @classmethod
    def parse(cls, text: str) -> Decision:
        return _by_name(cls, text, "decision")  # type: ignore[no-any-return]


class ResourceType(enum.Enum):
    ANY = "Any"
    CLUSTER = "Cluster"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(enum.IntEnum):
    """Ordered by specificity: a lower value is more specific."""

    LITERAL = 0
    PREFIXED = 1
    ANY = 2


@dataclass(frozen=True, slots=True)
class Resource:
    """``Topic:orders``, ``Topic:ord*``, ``Group:*``, ``Cluster``, or ``*``."""

    type: ResourceType
    name: str
    pattern: ResourcePattern

    @classmethod
    def parse(cls, text: str) -> Resource:
        text = text.strip()
        if text == "*":
            return cls(ResourceType.ANY, "", ResourcePattern.ANY)
        kind, colon, name = text.partition(":")
        rtype = _by_name(ResourceType, kind, "resource type")
        if rtype is ResourceType.ANY:
            raise AuthModelError(f"bad resource {text!r}: write * for any resource")
        if rtype is ResourceType.CLUSTER and not colon:
            name = "*"
        if not name:
            raise AuthModelError(f"bad resource {text!r}: expected TYPE:NAME, TYPE:PREFIX* or *")
        if name == "*":
            return cls(rtype, "", ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[:-1], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def group(cls, name: str) -> Resource:
        return cls(ResourceType.GROUP, name, ResourcePattern.LITERAL)

    @classmethod
    def cluster(cls) -> Resource:
        return cls(ResourceType.CLUSTER, "", ResourcePattern.ANY)

    @property
    def key(self) -> str:
        """Resource.toResourceKey: the text it is written and shown as."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        suffix = "*" if self.pattern is ResourcePattern.PREFIXED else ""
        return f"{self.type.value}:{self.name}{suffix}"

    def covers(self, wanted: Resource) -> bool:
        """Resource.isMatch: does this (pattern) resource cover `wanted` (a name)?"""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.PREFIXED:
            return wanted.name.startswith(self.name)
        return wanted.name == self.name


def _check_ip(text: str) -> str:
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise AuthModelError(f"bad source IP {text!r}: expected an address or a CIDR") from None
    return text.strip()


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """An ACL line: `decision` for `actions` on `resource` from `source_ips` (empty: any)."""

    resource: Resource
    actions: tuple[Action, ...]
    decision: Decision
    source_ips: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        resource: str,
        actions: Iterable[str],
        decision: str = "Allow",
        source_ips: Iterable[str] = (),
    ) -> PolicyEntry:
        parsed = tuple(dict.fromkeys(Action.parse(a) for a in actions))
        if not parsed:
            raise AuthModelError(f"no action for {resource!r}: give at least one")
        return cls(
            Resource.parse(resource),
            parsed,
            Decision.parse(decision),
            tuple(_check_ip(ip) for ip in source_ips),
        )

    def covers_action(self, wanted: Action) -> bool:
        """PolicyEntry.isMatchAction for one wanted action."""
        if wanted is Action.ANY:
            return bool(self.actions)
        return wanted in self.actions or Action.ALL in self.actions

    def covers_host(self, host: str) -> bool:
        """Environment.isMatch: no source IPs is any address."""
        if not self.source_ips:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host in self.source_ips
        for text in self.source_ips:
            network = ipaddress.ip_network(text, strict=False)
            if address.version == network.version and address in network:
                return True
        return False

    def specificity(self) -> tuple[int, int, int, int]:
        """Sort key of comparePolicyEntries: lower decides first."""
        return (
            1 if self.resource.type is ResourceType.ANY else 0,
            int(self.resource.pattern),
            -len(self.resource.name) if self.resource.pattern is ResourcePattern.PREFIXED else 0,
            0 if self.decision is Decision.DENY else 1,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource.key,
            "actions": [a.value for a in self.actions],
            "sourceIps": list(self.source_ips),
            "decision": self.decision.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicyEntry:
        return cls.build(
            str(data.get("resource") or ""),
            [str(a) for a in data.get("actions") or ()],
            str(data.get("decision") or "Allow"),
            [str(ip) for ip in data.get("sourceIps") or ()],
        )


def deciding_entry(
    entries: Iterable[PolicyEntry],
    wanted: Resource,
    action: Action | tuple[Action, ...],
    host: str,
) -> PolicyEntry | None:
    """The entry that decides `action` on `wanted` from `host`; None: no entry matches (refused).
    Several actions: an entry granting any of them matches (AclAuthorizationHandler keeps
    the entries whose `isMatchAction` takes the context's list, then the most specific)."""
    actions = action if isinstance(action, tuple) else (action,)
    matching = [
        e
        for e in entries
        if e.resource.covers(wanted)
        and any(e.covers_action(a) for a in actions)
        and e.covers_host(host)
    ]
    return min(matching, key=PolicyEntry.specificity, default=None)


def subject_of(text: str) -> str:
    """``User:alice`` as given, or ``alice`` made ``User:alice``."""
    text = text.strip()
    if not text:
        raise AuthModelError("the subject is empty")
    if text.startswith(USER_SUBJECT_PREFIX):
        if len(text) == len(USER_SUBJECT_PREFIX):
            raise AuthModelError("the subject names no user")
        return text
    if ":" in text:
        raise AuthModelError(f"bad subject {text!r}: only User:NAME subjects exist")
    return USER_SUBJECT_PREFIX + text


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    @property
    def enabled(self) -> bool:
        return self.status is UserStatus.ENABLE

    def to_json(self, *, with_password: bool) -> dict[str, Any]:
        """UserInfo; the password only for the broker's own file, never in an answer."""
        data: dict[str, Any] = {
            "username": self.username,
            "userType": self.user_type.value,
            "userStatus": self.status.value,
        }
        if with_password:
            data["password"] = self.password
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> User:
        username = str(data.get("username") or "")
        password = str(data.get("password") or "")
        if not username:
            raise AuthModelError("the username is empty")
        if not password:
            raise AuthModelError(f"user {username}: the password is empty")
        return cls(
            username,
            password,
            _by_name(UserType, str(data.get("userType") or "Normal"), "user type"),
            _by_name(UserStatus, str(data.get("userStatus") or "enable"), "user status"),
        )


@dataclass(frozen=True, slots=True)
class Acl:
    """A subject's policy entries (RocketMQ's Custom policy; tidemq keeps no Default one)."""

    subject: str
    entries: tuple[PolicyEntry, ...]

    def merged(self, entries: Sequence[PolicyEntry]) -> Acl:
        """Entries for a resource already listed replace it; new resources are added."""
        replaced = {e.resource for e in entries}
        kept = tuple(e for e in self.entries if e.resource not in replaced)
        return Acl(self.subject, kept + tuple(entries))

    def without(self, resources: Iterable[Resource]) -> Acl:
        gone = set(resources)
        return Acl(self.subject, tuple(e for e in self.entries if e.resource not in gone))

    def to_json(self) -> dict[str, Any]:
        """AclInfo with one Custom policy."""
        return {
            "subject": self.subject,
            "policies": [{"policyType": "Custom", "entries": [e.to_json() for e in self.entries]}],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Acl:
        subject = subject_of(str(data.get("subject") or ""))
        entries: list[PolicyEntry] = []
        for policy in data.get("policies") or ():
            entries.extend(PolicyEntry.from_json(e) for e in policy.get("entries") or ())
        return cls(subject, tuple(entries))


@dataclass(frozen=True, slots=True)
class AuthState:
    """All users and ACLs at one moment (what the gate judges with; swapped whole)."""

    users: Mapping[str, User] = field(default_factory=dict)
    acls: Mapping[str, Acl] = field(default_factory=dict)

    def user(self, username: str) -> User | None:
        return self.users.get(username)

    def entries_of(self, username: str) -> tuple[PolicyEntry, ...]:
        acl = self.acls.get(USER_SUBJECT_PREFIX + username)
        return () if acl is None else acl.entries

    def has_super_user(self) -> bool:
        return any(u.is_super and u.enabled for u in self.users.values())
