"""ACL 1.0 permissions: their values, their text forms, and the one check.

The policy file (``plain_acl.yml``) grants ``DENY``, ``PUB``, ``SUB`` or
``PUB|SUB`` per topic and group; a request needs ``PUB``, ``SUB`` or ``ANY``
on each resource it names. Keeping RocketMQ's numeric values and its exact
check means a policy behaves here as it does on a RocketMQ broker.

Sources (apache/rocketmq, tag rocketmq-all-4.9.8 unless said otherwise):
``acl/.../common/Permission.java`` (values; checkPermission;
parsePermFromString; parseResourcePerms / checkResourcePerms; ADMIN_CODE),
``acl/.../common/AclConstants.java`` (the texts ``PUB``, ``SUB``, ``DENY``,
``PUB|SUB``, ``SUB|PUB``). The last ACL 1.0 version (f75dc5a4d2^, before
RIP-77 removed it) extends ADMIN_CODE; both sets are given here.
"""

from __future__ import annotations

from enum import IntFlag

from tidemq.common.names import retry_topic_of
from tidemq.protocol.codes import RequestCode


class Permission(IntFlag):
    """Permission.java's byte flags (DENY = 1, ANY = 1 << 1, PUB = 1 << 2, SUB = 1 << 3)."""

    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


PUB_SUB = Permission.PUB | Permission.SUB
"""12: what ``PUB|SUB`` and ``SUB|PUB`` grant."""

# AclConstants: the only texts a policy may use for a permission.
_BY_TEXT: dict[str, Permission] = {
    "PUB": Permission.PUB,
    "SUB": Permission.SUB,
    "PUB|SUB": PUB_SUB,
    "SUB|PUB": PUB_SUB,
    "DENY": Permission.DENY,
}

_NAMES: dict[int, str] = {
    int(Permission.DENY): "DENY",
    int(Permission.ANY): "ANY",
    int(Permission.PUB): "PUB",
    int(Permission.SUB): "SUB",
    int(PUB_SUB): "PUB|SUB",
}


def permission_name(perm: int) -> str:
    """``"PUB|SUB"`` for 12 and so on; the number for any other combination."""
    return _NAMES.get(int(perm), str(int(perm)))


def parse_permission(text: str | None, *, strict: bool = True) -> Permission:
    """A permission from its policy text, surrounding blanks ignored.

    Java's parsePermFromString turns ``None`` and any unknown text into DENY
    silently; that is ``strict=False``. The default refuses unknown text with
    a ValueError naming it, as Java's checkResourcePerms does for topicPerms
    and groupPerms (``None`` is DENY in both modes, as in Java)."""
    if text is None:
        return Permission.DENY
    perm = _BY_TEXT.get(_java_trim(text))
    if perm is not None:
        return perm
    if not strict:
        return Permission.DENY
    raise ValueError(f"bad permission {text!r}: expected one of DENY, PUB, SUB, PUB|SUB, SUB|PUB")


_JAVA_BLANKS = "".join(chr(c) for c in range(0x21))


def _java_trim(text: str) -> str:
    """String.trim(): strips U+0000..U+0020 only (not other Unicode spaces)."""
    return text.strip(_JAVA_BLANKS)


def _java_split(text: str, separator: str) -> list[str]:
    """commons-lang StringUtils.split: empty tokens are dropped."""
    return [part for part in text.split(separator) if part]


def parse_resource_permission(line: str, *, is_topic: bool = True) -> tuple[str, Permission]:
    """``"topicA=PUB"`` -> ``("topicA", PUB)``; for a group (``is_topic=False``)
    the resource is the group's retry topic, ``"%RETRY%groupA"``, as
    Permission.parseResourcePerms stores it (groups and retry topics share
    one map).

    Like Java, the line is split on ``=`` with empty pieces dropped and must
    give exactly two; both are trimmed. Unknown permission text is refused
    (checkResourcePerms)."""
    kind = "topic" if is_topic else "group"
    items = _java_split(line, "=")
    if len(items) != 2:
        raise ValueError(
            f"bad {kind} permission {line!r}: expected 'NAME=PERM', for example topicA=SUB"
        )
    name, perm_text = _java_trim(items[0]), _java_trim(items[1])
    if not name:
        raise ValueError(f"bad {kind} permission {line!r}: the name is blank")
    try:
        perm = parse_permission(perm_text)
    except ValueError:
        raise ValueError(
            f"bad {kind} permission {line!r}: expected SUB, PUB, SUB|PUB, PUB|SUB or DENY"
        ) from None
    return (name if is_topic else retry_topic_of(name)), perm


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission, bit for bit.

    Owned DENY refuses everything; needed ANY is met by PUB or SUB;
    otherwise any common bit suffices."""
    if owned & Permission.DENY:
        return False
    if needed & Permission.ANY:
        return bool(owned & Permission.PUB) or bool(owned & Permission.SUB)
    return bool(needed & owned)


ADMIN_CODES_4_9: frozenset[int] = frozenset(
    {
        int(RequestCode.UPDATE_AND_CREATE_TOPIC),
        int(RequestCode.UPDATE_BROKER_CONFIG),
        int(RequestCode.DELETE_TOPIC_IN_BROKER),
        int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
        int(RequestCode.DELETE_SUBSCRIPTIONGROUP),
    }
)
"""Permission.ADMIN_CODE of rocketmq-all-4.9.8."""

ADMIN_CODES: frozenset[int] = ADMIN_CODES_4_9 | frozenset(
    {
        int(RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC),
        int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG),
        int(RequestCode.DELETE_ACL_CONFIG),
        int(RequestCode.GET_BROKER_CLUSTER_ACL_INFO),
    }
)
"""Permission.ADMIN_CODE of the last ACL 1.0 version (f75dc5a4d2^): the 4.9
set plus static-topic creation and the ACL config codes themselves."""


def needs_admin(code: int) -> bool:
    """Permission.needAdminPerm: only an ``admin: true`` account may send it."""
    return code in ADMIN_CODES
