"""RocketMQ's ``plain_acl.yml`` policy file, read unchanged, checked, and written back.

The format is the one of apache/rocketmq ``distribution/conf/plain_acl.yml``
(identical in rocketmq-all-4.9.8 and 5.2.0), read by
``acl/.../plain/PlainPermissionManager.java`` through
``AclUtils.getYamlDataObject`` (snakeyaml ``loadAs(..., PlainAccessData.class)``)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
    dataVersion: [{counter: 1, timestamp: 1700000000000}]   # written by RocketMQ on update

Rules and their sources (apache/rocketmq, tag rocketmq-all-5.2.0):

* Top-level keys are ``PlainAccessData``'s fields (``globalWhiteRemoteAddresses``,
  ``accounts``, ``dataVersion``); an account's keys are ``PlainAccessConfig``'s
  (``common/.../PlainAccessConfig.java``). snakeyaml refuses a key the class
  does not have; so do we (it catches typos such as ``acounts``).
* An empty file is an empty policy (``PlainPermissionManager.load``: "No data in file").
* ``accessKey`` and ``secretKey`` are required and each must be *longer* than 6
  characters (``PlainPermissionManager.checkPlainAccessConfig``:
  ``length() <= AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH``, both 6).
* Left out: ``admin`` is false (a Java ``boolean``); ``defaultTopicPerm`` and
  ``defaultGroupPerm`` are DENY (``Permission.parsePermFromString(null)``);
  ``whiteRemoteAddress`` is blank, which matches no address
  (``RemoteAddressStrategyFactory.BLANK_NET_ADDRESS_STRATEGY``); ``topicPerms`` /
  ``groupPerms`` are empty.
* ``topicPerms`` / ``groupPerms`` lines are ``NAME=PERM`` (``Permission.parseResourcePerms``
  / ``checkResourcePerms``); a group's entry is stored under its retry topic
  ``%RETRY%group``, groups first, then topics, a later line replacing an earlier
  one (``PlainAccessResource.build`` and ``addResourceAndPerm``: one HashMap).
* Scalars are read as written: snakeyaml fills the ``String`` property
  ``secretKey`` with the text ``12345678``, so ``01234567`` or ``0x1234567``
  stay those characters here too (plain ``yaml.safe_load`` would turn them into
  the integers 342391 and 19088743).

Where tidemq is stricter than RocketMQ, on purpose:

* A duplicate ``accessKey`` is an error (Java keeps the first and logs
  "The accessKey {} is repeated in multiple ACL files").
* Unknown permission text in ``defaultTopicPerm`` / ``defaultGroupPerm`` is an
  error (Java's parsePermFromString silently makes it DENY; it already refuses
  it in topicPerms/groupPerms via checkResourcePerms).
* Error messages name the account and the field but never show a secret key
  (Java's message prints it).

Permission texts are parsed by :mod:`tidemq.acl.permissions`, address
patterns by :mod:`tidemq.acl.remote_address`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from tidemq.acl.permissions import (
    Permission,
    parse_permission,
    parse_resource_permission,
    permission_name,
)
from tidemq.acl.remote_address import parse_pattern
from tidemq.common.names import RETRY_GROUP_TOPIC_PREFIX, retry_topic_of

__all__ = [
    "ACCESS_KEY_MIN_LENGTH",
    "SECRET_KEY_MIN_LENGTH",
    "AclConfigError",
    "DataVersion",
    "PlainAccessAccount",
    "PlainAclConfig",
    "dump_plain_acl",
    "load_plain_acl",
    "parse_plain_acl",
]

ACCESS_KEY_MIN_LENGTH = 6
"""AclConstants.ACCESS_KEY_MIN_LENGTH: an accessKey must be longer than this."""
SECRET_KEY_MIN_LENGTH = 6
"""AclConstants.SECRET_KEY_MIN_LENGTH: a secretKey must be longer than this."""

_TOP_KEYS = ("globalWhiteRemoteAddresses", "accounts", "dataVersion")
_ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "whiteRemoteAddress",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
)
_DATA_VERSION_KEYS = ("timestamp", "counter")


class AclConfigError(ValueError):
    """A ``plain_acl.yml`` that cannot be used; the message names the place and the fault."""


@dataclass(frozen=True, slots=True)
class DataVersion:
    """PlainAccessData.DataVersion: RocketMQ's change counter for the file."""

    timestamp: int = 0
    counter: int = 0


@dataclass(frozen=True, slots=True)
class PlainAccessAccount:
    """One entry of ``accounts`` (PlainAccessConfig), checked; the defaults are Java's."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: Permission = Permission.DENY
    default_group_perm: Permission = Permission.DENY
    #: (topic, permission) as written, in file order
    topic_perms: tuple[tuple[str, Permission], ...] = ()
    #: (group, permission) as written (the group, not its retry topic), in file order
    group_perms: tuple[tuple[str, Permission], ...] = ()

    def resource_perms(self) -> dict[str, Permission]:
        """PlainAccessResource.resourcePermMap: groups under ``%RETRY%group``, then
        topics, a later entry replacing an earlier one with the same key."""
        perms: dict[str, Permission] = {}
        for group, perm in self.group_perms:
            perms[retry_topic_of(group)] = perm
        for topic, perm in self.topic_perms:
            perms[topic] = perm
        return perms


@dataclass(frozen=True, slots=True)
class PlainAclConfig:
    """A whole ``plain_acl.yml`` (PlainAccessData), checked."""

    global_white_remote_addresses: tuple[str, ...] = ()
    accounts: tuple[PlainAccessAccount, ...] = ()
    data_version: tuple[DataVersion, ...] = ()

    def account(self, access_key: str) -> PlainAccessAccount | None:
        """The account with this access key, or None."""
        for account in self.accounts:
            if account.access_key == access_key:
                return account
        return None


# --- reading --------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader that keeps int, float, bool and timestamp scalars as their text.

    snakeyaml fills PlainAccessConfig's String properties with the scalar's
    text, so ``secretKey: 01234567`` is the secret "01234567" in RocketMQ.
    Only null stays None. Still a SafeLoader: no Python objects are built.
    """


for _tag in ("int", "float", "bool", "timestamp"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.construct_scalar)

# YAML 1.1 booleans, as snakeyaml (and PyYAML's SafeConstructor) read them
_BOOLEANS: Mapping[str, bool] = yaml.SafeLoader.bool_values


def _describe(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)[:60]


def _check_keys(data: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise AclConfigError(
                f"{where}: unknown field {str(key)[:60]!r}; expected one of {', '.join(allowed)}"
            )


def _string(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise AclConfigError(f"{where}: expected text, got {_describe(value)}")
    return value


def _string_list(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: expected a list, got {_describe(value)}")
    items: list[str] = []
    for i, item in enumerate(value):
        text = _string(item, f"{where}[{i}]")
        if text is None:
            raise AclConfigError(f"{where}[{i}]: empty entry")
        items.append(text)
    return tuple(items)


def _check_address(text: str | None, where: str) -> None:
    """RemoteAddressStrategyFactory.getRemoteAddressStrategy refuses the pattern."""
    if text is None or not text.strip():
        return  # blank: BLANK_NET_ADDRESS_STRATEGY, matches nothing
    try:
        parse_pattern(text)
    except ValueError as e:
        raise AclConfigError(f"{where}: bad address pattern {text[:80]!r}: {e}") from None


def _permission(value: object, where: str) -> Permission:
    text = _string(value, where)
    if text is None:
        return Permission.DENY  # Permission.parsePermFromString(null)
    try:
        return parse_permission(text)
    except ValueError as e:
        raise AclConfigError(f"{where}: {e}") from None


def _resource_perms(
    value: object, where: str, *, is_topic: bool
) -> tuple[tuple[str, Permission], ...]:
    pairs: list[tuple[str, Permission]] = []
    for i, line in enumerate(_string_list(value, where)):
        try:
            name, perm = parse_resource_permission(line, is_topic=is_topic)
        except ValueError as e:
            raise AclConfigError(f"{where}[{i}]: {e}") from None
        if not is_topic:
            name = name.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
        pairs.append((name, perm))
    return tuple(pairs)


def _admin(value: object, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        flag = _BOOLEANS.get(value.lower())
        if flag is not None:
            return flag
    raise AclConfigError(f"{where}: expected true or false, got {_describe(value)}")


def _account(raw: object, index: int) -> PlainAccessAccount:
    where = f"accounts[{index}]"
    if not isinstance(raw, Mapping):
        raise AclConfigError(f"{where}: expected a mapping of fields, got {_describe(raw)}")
    access_key = _string(raw.get("accessKey"), f"{where}.accessKey")
    if access_key is None or access_key == "":
        raise AclConfigError(f"{where}: accessKey is missing")
    where = f"{where} (accessKey {access_key[:60]!r})"
    _check_keys(raw, _ACCOUNT_KEYS, where)
    if len(access_key) <= ACCESS_KEY_MIN_LENGTH:
        raise AclConfigError(
            f"{where}: accessKey must be longer than {ACCESS_KEY_MIN_LENGTH} characters"
        )
    secret_key = _string(raw.get("secretKey"), f"{where}: secretKey")
    if secret_key is None or secret_key == "":
        raise AclConfigError(f"{where}: secretKey is missing")
    if len(secret_key) <= SECRET_KEY_MIN_LENGTH:
        raise AclConfigError(
            f"{where}: secretKey must be longer than {SECRET_KEY_MIN_LENGTH} characters"
        )
    white = _string(raw.get("whiteRemoteAddress"), f"{where}: whiteRemoteAddress")
    _check_address(white, f"{where}: whiteRemoteAddress")
    return PlainAccessAccount(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=white,
        admin=_admin(raw.get("admin"), f"{where}: admin"),
        default_topic_perm=_permission(raw.get("defaultTopicPerm"), f"{where}: defaultTopicPerm"),
        default_group_perm=_permission(raw.get("defaultGroupPerm"), f"{where}: defaultGroupPerm"),
        topic_perms=_resource_perms(raw.get("topicPerms"), f"{where}: topicPerms", is_topic=True),
        group_perms=_resource_perms(raw.get("groupPerms"), f"{where}: groupPerms", is_topic=False),
    )


def _long(value: object, where: str) -> int:
    text = _string(value, where)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        raise AclConfigError(f"{where}: expected a whole number, got {text[:40]!r}") from None


def _data_versions(value: object) -> tuple[DataVersion, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise AclConfigError(f"dataVersion: expected a list, got {_describe(value)}")
    versions: list[DataVersion] = []
    for i, raw in enumerate(value):
        where = f"dataVersion[{i}]"
        if not isinstance(raw, Mapping):
            raise AclConfigError(f"{where}: expected a mapping, got {_describe(raw)}")
        _check_keys(raw, _DATA_VERSION_KEYS, where)
        versions.append(
            DataVersion(
                timestamp=_long(raw.get("timestamp"), f"{where}.timestamp"),
                counter=_long(raw.get("counter"), f"{where}.counter"),
            )
        )
    return tuple(versions)


def parse_plain_acl(text: str) -> PlainAclConfig:
    """Parse and check the text of a ``plain_acl.yml``; raise AclConfigError if unusable."""
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as e:
        raise AclConfigError(f"not valid YAML: {e}") from None
    except RecursionError:
        raise AclConfigError("not valid YAML: nested too deeply") from None
    if data is None:
        return PlainAclConfig()  # PlainPermissionManager.load: "No data in file"
    if not isinstance(data, Mapping):
        raise AclConfigError(f"the file must be a mapping of fields, got {_describe(data)}")
    _check_keys(data, _TOP_KEYS, "top level")
    white = _string_list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
    for i, pattern in enumerate(white):
        _check_address(pattern, f"globalWhiteRemoteAddresses[{i}]")
    raw_accounts = data.get("accounts")
    if raw_accounts is None:
        raw_accounts = []
    if not isinstance(raw_accounts, list):
        raise AclConfigError(f"accounts: expected a list, got {_describe(raw_accounts)}")
    accounts: list[PlainAccessAccount] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, i)
        first = seen.setdefault(account.access_key, i)
        if first != i:
            raise AclConfigError(
                f"accounts[{i}]: duplicate accessKey {account.access_key[:60]!r}, "
                f"already used by accounts[{first}]"
            )
        accounts.append(account)
    return PlainAclConfig(
        global_white_remote_addresses=white,
        accounts=tuple(accounts),
        data_version=_data_versions(data.get("dataVersion")),
    )


def load_plain_acl(path: str | Path) -> PlainAclConfig:
    """Read and parse a ``plain_acl.yml`` file (UTF-8)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise AclConfigError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AclConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return parse_plain_acl(text)
    except AclConfigError as e:
        raise AclConfigError(f"{path}: {e}") from None


# --- writing --------------------------------------------------------------------------


def _account_data(account: PlainAccessAccount) -> dict[str, object]:
    data: dict[str, object] = {
        "accessKey": account.access_key,
        "secretKey": account.secret_key,
        "admin": account.admin,
        "defaultTopicPerm": permission_name(account.default_topic_perm),
        "defaultGroupPerm": permission_name(account.default_group_perm),
    }
    if account.white_remote_address is not None:
        data["whiteRemoteAddress"] = account.white_remote_address
    if account.topic_perms:
        data["topicPerms"] = [f"{n}={permission_name(p)}" for n, p in account.topic_perms]
    if account.group_perms:
        data["groupPerms"] = [f"{n}={permission_name(p)}" for n, p in account.group_perms]
    return data


def dump_plain_acl(config: PlainAclConfig) -> str:
    """The ``plain_acl.yml`` text of `config`, with RocketMQ's field names.

    ``parse_plain_acl(dump_plain_acl(c)) == c`` for every checked config.
    Text that YAML would read as a number or boolean is quoted.
    """
    data: dict[str, object] = {}
    if config.global_white_remote_addresses:
        data["globalWhiteRemoteAddresses"] = list(config.global_white_remote_addresses)
    data["accounts"] = [_account_data(a) for a in config.accounts]
    if config.data_version:
        data["dataVersion"] = [
            {"counter": v.counter, "timestamp": v.timestamp} for v in config.data_version
        ]
    # allow_unicode=False: PyYAML writes U+0085 and U+2028 raw, which YAML reads as line breaks
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=False, default_flow_style=False)
    return text
