"""The plain_acl.yml policy file: RocketMQ's own sample reads unchanged, faults are named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.acl.permissions import Permission
from tidemq.acl.plain_config import (
    AclConfigError,
    DataVersion,
    PlainAccessAccount,
    PlainAclConfig,
    dump_plain_acl,
    load_plain_acl,
    parse_plain_acl,
)

# apache/rocketmq distribution/conf/plain_acl.yml, verbatim (identical at
# rocketmq-all-4.9.8, 5.2.0 and 5.3.0; removed from HEAD with ACL 1.0). Its last line
# is four spaces, kept apart so no line of this file ends in blanks.
SAMPLE = (
    """# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the "License"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.

globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""
    "    \n"
)

MIRROR = Path("/work/.mirror/apache+rocketmq/repo")


def account_yaml(**fields: str | None) -> str:
    """A one-account file; `fields` are YAML lines under the account (None omits)."""
    base: dict[str, str | None] = {"accessKey": "RocketMQ", "secretKey": "12345678"}
    base.update(fields)
    lines = [f"    {k}: {v}" for k, v in base.items() if v is not None]
    lines[0] = "  - " + lines[0].lstrip()
    return "accounts:\n" + "\n".join(lines) + "\n"


def error_of(text: str) -> str:
    with pytest.raises(AclConfigError) as info:
        parse_plain_acl(text)
    return str(info.value)


# --- RocketMQ's sample ----------------------------------------------------------------


def test_fixture_is_the_distribution_file() -> None:
    if not MIRROR.exists():
        pytest.skip("no apache/rocketmq mirror here")
    shown = subprocess.run(
        ["git", "-C", str(MIRROR), "show", "rocketmq-all-5.2.0:distribution/conf/plain_acl.yml"],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        pytest.skip("the mirror lacks tag rocketmq-all-5.2.0")
    assert shown.stdout == SAMPLE


def test_sample_reads_unchanged() -> None:
    config = parse_plain_acl(SAMPLE)
    assert config.global_white_remote_addresses == ("10.10.103.*", "192.168.0.*")
    assert config.data_version == ()
    first, second = config.accounts
    assert first == PlainAccessAccount(
        access_key="RocketMQ",
        secret_key="12345678",  # an integer to YAML, the text to snakeyaml and to us
        white_remote_address=None,
        admin=False,
        default_topic_perm=Permission.DENY,
        default_group_perm=Permission.SUB,
        topic_perms=(
            ("topicA", Permission.DENY),
            ("topicB", Permission.PUB | Permission.SUB),
            ("topicC", Permission.SUB),
        ),
        group_perms=(
            ("groupA", Permission.DENY),
            ("groupB", Permission.PUB | Permission.SUB),
            ("groupC", Permission.SUB),
        ),
    )
    # left-out fields take Java's defaults
    assert second == PlainAccessAccount(
        access_key="rocketmq2",
        secret_key="12345678",
        white_remote_address="192.168.1.*",
        admin=True,
    )
    assert second.default_topic_perm is Permission.DENY
    assert second.default_group_perm is Permission.DENY
    assert config.account("rocketmq2") is second
    assert config.account("nobody") is None


def test_sample_resource_perms_use_retry_topics() -> None:
    first = parse_plain_acl(SAMPLE).accounts[0]
    assert first.resource_perms() == {
        "%RETRY%groupA": Permission.DENY,
        "%RETRY%groupB": Permission.PUB | Permission.SUB,
        "%RETRY%groupC": Permission.SUB,
        "topicA": Permission.DENY,
        "topicB": Permission.PUB | Permission.SUB,
        "topicC": Permission.SUB,
    }


def test_sample_round_trips() -> None:
    config = parse_plain_acl(SAMPLE)
    assert parse_plain_acl(dump_plain_acl(config)) == config


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE, encoding="utf-8")
    assert load_plain_acl(path) == parse_plain_acl(SAMPLE)
    assert load_plain_acl(str(path)) == parse_plain_acl(SAMPLE)


def test_secret_not_in_repr() -> None:
    assert "12345678" not in repr(parse_plain_acl(SAMPLE))


def test_data_is_immutable() -> None:
    config = parse_plain_acl(SAMPLE)
    with pytest.raises(AttributeError):
        config.accounts = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        config.accounts[0].admin = True  # type: ignore[misc]


# --- what RocketMQ reads, read the same -----------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n", "~\n"])
def test_empty_file_is_an_empty_policy(text: str) -> None:
    assert parse_plain_acl(text) == PlainAclConfig()


def test_file_without_accounts() -> None:
    config = parse_plain_acl("globalWhiteRemoteAddresses:\n  - 10.10.103.*\n")
    assert config.accounts == ()
    assert parse_plain_acl("accounts:\n") == PlainAclConfig()


@pytest.mark.parametrize(
    ("written", "secret"),
    [
        ("12345678", "12345678"),
        ("01234567", "01234567"),
        ("0x1234567", "0x1234567"),
        ("1234567.0", "1234567.0"),
        ("'12345678'", "12345678"),
        ("2001-12-14", "2001-12-14"),
        ("true1234", "true1234"),
    ],
)
def test_scalars_are_read_as_written(written: str, secret: str) -> None:
    config = parse_plain_acl(account_yaml(secretKey=written))
    assert config.accounts[0].secret_key == secret
    assert parse_plain_acl(dump_plain_acl(config)) == config


def test_numeric_access_key() -> None:
    config = parse_plain_acl(account_yaml(accessKey="1234567"))
    assert config.account("1234567") is not None


@pytest.mark.parametrize(
    ("written", "admin"),
    [
        ("true", True),
        ("false", False),
        ("True", True),
        ("yes", True),
        ("off", False),
        ("", False),
        ("~", False),
    ],
)
def test_admin_values(written: str, admin: bool) -> None:
    assert parse_plain_acl(account_yaml(admin=written)).accounts[0].admin is admin


def test_permissions_with_blanks_and_both_orders() -> None:
    text = account_yaml(
        defaultTopicPerm="' PUB '",
        defaultGroupPerm="SUB|PUB",
        topicPerms="[' topicA = SUB|PUB ', topicB=PUB]",
    )
    account = parse_plain_acl(text).accounts[0]
    assert account.default_topic_perm is Permission.PUB
    assert account.default_group_perm == Permission.PUB | Permission.SUB
    assert account.topic_perms == (
        ("topicA", Permission.PUB | Permission.SUB),
        ("topicB", Permission.PUB),
    )


def test_later_resource_line_wins_as_in_java() -> None:
    text = account_yaml(
        topicPerms="[t=PUB, t=DENY, '%RETRY%g=PUB']",
        groupPerms="[g=SUB]",
    )
    account = parse_plain_acl(text).accounts[0]
    assert account.topic_perms == (
        ("t", Permission.PUB),
        ("t", Permission.DENY),
        ("%RETRY%g", Permission.PUB),
    )
    # groups go in first, topics after: the topic line for %RETRY%g replaces the group's
    assert account.resource_perms() == {"%RETRY%g": Permission.PUB, "t": Permission.DENY}


def test_data_version_is_kept() -> None:
    text = account_yaml() + "dataVersion:\n  - counter: 3\n    timestamp: 1700000000000\n"
    config = parse_plain_acl(text)
    assert config.data_version == (DataVersion(timestamp=1700000000000, counter=3),)
    assert parse_plain_acl(dump_plain_acl(config)) == config


@pytest.mark.parametrize(
    "pattern",
    [
        "*",
        "*.*.*.*",
        "192.168.1.*",
        "192.168.1.1-100",
        "192.168.*.*",
        "192.168.1.{1,2,3}",
        "10.0.0.1,10.0.0.2",
        "10.0.0.1",
        "1050::5:600:300c:326b",
        "1050::5:600:300c:*",
        "1050::5:600:300c:{1,2}",
        " ",
    ],
)
def test_address_patterns_accepted(pattern: str) -> None:
    text = account_yaml(whiteRemoteAddress=f"'{pattern}'")
    text += f"globalWhiteRemoteAddresses: ['{pattern}']\n"
    config = parse_plain_acl(text)
    assert config.accounts[0].white_remote_address == pattern
    assert config.global_white_remote_addresses == (pattern,)


# --- refused, with the account and the field named ------------------------------------


def test_missing_access_key() -> None:
    assert error_of("accounts:\n  - secretKey: 12345678\n") == "accounts[0]: accessKey is missing"
    assert "accounts[0]: accessKey is missing" in error_of(account_yaml(accessKey="''"))
    assert "accounts[0]: accessKey is missing" in error_of(account_yaml(accessKey="~"))


def test_missing_secret_key() -> None:
    message = error_of(account_yaml(secretKey=None))
    assert message == "accounts[0] (accessKey 'RocketMQ'): secretKey is missing"
    assert "secretKey is missing" in error_of(account_yaml(secretKey=""))


def test_key_lengths_follow_java() -> None:
    # PlainPermissionManager.checkPlainAccessConfig: length <= 6 is refused
    message = error_of(account_yaml(secretKey="123456"))
    assert message == (
        "accounts[0] (accessKey 'RocketMQ'): secretKey must be longer than 6 characters"
    )
    assert "123456" not in message.replace("'RocketMQ'", "")
    assert "accessKey must be longer than 6" in error_of(account_yaml(accessKey="abcdef"))
    parse_plain_acl(account_yaml(accessKey="abcdefg", secretKey="1234567"))


def test_duplicate_access_key() -> None:
    text = SAMPLE + "\n  - accessKey: RocketMQ\n    secretKey: 87654321\n"
    assert error_of(text) == (
        "accounts[2]: duplicate accessKey 'RocketMQ', already used by accounts[0]"
    )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("defaultTopicPerm", "deny", "defaultTopicPerm: bad permission 'deny'"),
        ("defaultGroupPerm", "ALL", "defaultGroupPerm: bad permission 'ALL'"),
        ("defaultTopicPerm", "'PUB,SUB'", "defaultTopicPerm: bad permission"),
        ("topicPerms", "[topicA]", "topicPerms[0]: bad topic permission 'topicA'"),
        ("topicPerms", "[topicB=PUB, topicA=ALL]", "topicPerms[1]: bad topic permission"),
        ("topicPerms", "['=PUB']", "topicPerms[0]: bad topic permission"),
        ("topicPerms", "['a=b=PUB']", "topicPerms[0]: bad topic permission"),
        ("topicPerms", "[~]", "topicPerms[0]: empty entry"),
        ("topicPerms", "topicA=PUB", "topicPerms: expected a list"),
        ("groupPerms", "[groupA=pub]", "groupPerms[0]: bad group permission 'groupA=pub'"),
    ],
)
def test_bad_permissions(field: str, value: str, expected: str) -> None:
    message = error_of(account_yaml(**{field: value}))
    assert message.startswith("accounts[0] (accessKey 'RocketMQ'): ")
    assert expected in message


@pytest.mark.parametrize(
    "pattern", ["192.168.1.300", "abc", "192.168.1.1-300", "192.168.{1,2}", "10.0.0.1,nope"]
)
def test_bad_address_patterns(pattern: str) -> None:
    message = error_of(account_yaml(whiteRemoteAddress=pattern))
    assert message.startswith(
        "accounts[0] (accessKey 'RocketMQ'): whiteRemoteAddress: bad address pattern"
    )
    message = error_of(f"globalWhiteRemoteAddresses: ['10.0.0.1', '{pattern}']\n")
    assert message.startswith("globalWhiteRemoteAddresses[1]: bad address pattern")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acounts: []\n", "top level: unknown field 'acounts'"),
        (account_yaml(secretkey="x"), "(accessKey 'RocketMQ'): unknown field 'secretkey'"),
        ("- accessKey: RocketMQ\n", "the file must be a mapping of fields, got a list"),
        ("just text\n", "the file must be a mapping of fields"),
        ("accounts: RocketMQ\n", "accounts: expected a list"),
        ("accounts:\n  - RocketMQ\n", "accounts[0]: expected a mapping of fields"),
        ("accounts: [{accessKey: [a]}]\n", "accounts[0].accessKey: expected text, got a list"),
        (account_yaml(secretKey="{a: b}"), "secretKey: expected text, got a mapping"),
        (account_yaml(admin="maybe"), "admin: expected true or false, got 'maybe'"),
        (account_yaml(admin="[true]"), "admin: expected true or false, got a list"),
        ("globalWhiteRemoteAddresses: 10.0.0.1\n", "globalWhiteRemoteAddresses: expected a list"),
        ("dataVersion: 1\n", "dataVersion: expected a list"),
        ("dataVersion: [1]\n", "dataVersion[0]: expected a mapping"),
        ("dataVersion: [{counter: x}]\n", "dataVersion[0].counter: expected a whole number"),
        ("dataVersion: [{count: 1}]\n", "dataVersion[0]: unknown field 'count'"),
        ("accounts: [\n", "not valid YAML"),
        ("a: b\n a: c\n", "not valid YAML"),
        ("x: !!python/object:os.system ls\n", "not valid YAML"),
    ],
)
def test_malformed_files(text: str, expected: str) -> None:
    assert expected in error_of(text)


@pytest.mark.parametrize("text", ["[" * 100_000, "accounts: " + "[" * 5000 + "]" * 5000])
def test_deep_nesting_is_refused(text: str) -> None:
    assert error_of(text) == "not valid YAML: nested too deeply"


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.yml"
    with pytest.raises(AclConfigError, match="cannot read"):
        load_plain_acl(missing)
    binary = tmp_path / "bin.yml"
    binary.write_bytes(b"accounts: \xff\n")
    with pytest.raises(AclConfigError, match="not UTF-8"):
        load_plain_acl(binary)
    bad = tmp_path / "bad.yml"
    bad.write_text("acounts: []\n", encoding="utf-8")
    with pytest.raises(AclConfigError, match=r"bad\.yml: top level: unknown field"):
        load_plain_acl(bad)


def test_error_is_a_value_error() -> None:
    assert issubclass(AclConfigError, ValueError)


# --- properties -----------------------------------------------------------------------

_keys = st.text(min_size=7, max_size=30)
_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="="),
    min_size=1,
    max_size=20,
)
_perms = st.sampled_from(
    [Permission.DENY, Permission.PUB, Permission.SUB, Permission.PUB | Permission.SUB]
)
_patterns = st.sampled_from([None, "*", "192.168.1.*", "10.0.0.1", "10.0.0.1-20", "::1"])


@st.composite
def _configs(draw: st.DrawFn) -> PlainAclConfig:
    keys = draw(st.lists(_keys, unique=True, max_size=4))
    accounts = tuple(
        PlainAccessAccount(
            access_key=key,
            secret_key=draw(_keys),
            white_remote_address=draw(_patterns),
            admin=draw(st.booleans()),
            default_topic_perm=draw(_perms),
            default_group_perm=draw(_perms),
            topic_perms=tuple(draw(st.lists(st.tuples(_names, _perms), max_size=3))),
            group_perms=tuple(draw(st.lists(st.tuples(_names, _perms), max_size=3))),
        )
        for key in keys
    )
    white = tuple(p for p in draw(st.lists(_patterns, max_size=3)) if p is not None)
    versions = tuple(
        DataVersion(timestamp=t, counter=c)
        for t, c in draw(
            st.lists(st.tuples(st.integers(0, 2**63), st.integers(0, 2**63)), max_size=2)
        )
    )
    return PlainAclConfig(white, accounts, versions)


@settings(max_examples=500, deadline=None)  # a loaded machine is no failure
@given(_configs())
def test_round_trip(config: PlainAclConfig) -> None:
    assert parse_plain_acl(dump_plain_acl(config)) == config


@given(st.text(max_size=400))
def test_any_text_is_read_or_refused_clearly(text: str) -> None:
    try:
        parse_plain_acl(text)
    except AclConfigError as e:
        assert str(e)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=12),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "accounts",
                        "accessKey",
                        "secretKey",
                        "topicPerms",
                        "admin",
                        "globalWhiteRemoteAddresses",
                        "whiteRemoteAddress",
                        "dataVersion",
                        "counter",
                        "groupPerms",
                        "defaultTopicPerm",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_any_structure_is_read_or_refused_clearly(data: object) -> None:
    try:
        parse_plain_acl(yaml.safe_dump(data))
    except AclConfigError as e:
        assert str(e)


@pytest.mark.parametrize("odd", ["\x85", "\u2028", "\u2029", "\t", " ", "主题", "é", "#", ": "])
def test_round_trip_of_odd_characters(odd: str) -> None:
    account = PlainAccessAccount(
        access_key=f"key{odd}1234",
        secret_key=f"{odd}secret{odd}",
        topic_perms=((f"t{odd}x", Permission.PUB),),
        group_perms=((f"g{odd}x", Permission.SUB),),
    )
    config = PlainAclConfig(accounts=(account,))
    assert parse_plain_acl(dump_plain_acl(config)) == config
