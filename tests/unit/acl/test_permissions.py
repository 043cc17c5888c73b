"""ACL 1.0 permissions: values, texts, resource lines, the check, admin codes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl.permissions import (
    ADMIN_CODES,
    ADMIN_CODES_4_9,
    PUB_SUB,
    Permission,
    check_permission,
    needs_admin,
    parse_permission,
    parse_resource_permission,
    permission_name,
)
from tidemq.protocol.codes import RequestCode


def test_values_are_javas() -> None:
    assert [int(p) for p in (Permission.DENY, Permission.ANY, Permission.PUB, Permission.SUB)] == [
        1,
        2,
        4,
        8,
    ]
    assert int(PUB_SUB) == 12
    assert permission_name(PUB_SUB) == "PUB|SUB"
    assert permission_name(Permission.ANY) == "ANY"
    assert permission_name(3) == "3"


@pytest.mark.parametrize(
    ("text", "perm"),
    [
        ("PUB", Permission.PUB),
        (" SUB ", Permission.SUB),
        ("PUB|SUB", PUB_SUB),
        ("SUB|PUB", PUB_SUB),
        ("DENY", Permission.DENY),
        (None, Permission.DENY),
    ],
)
def test_parse_permission(text: str | None, perm: Permission) -> None:
    assert parse_permission(text) == perm


@pytest.mark.parametrize("text", ["pub", "PUB | SUB", "ANY", "", "PUB,SUB", "PUB\u00a0"])
def test_parse_permission_refuses_unknown_text_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="bad permission") as info:
        parse_permission(text)
    assert repr(text) in str(info.value)
    assert parse_permission(text, strict=False) == Permission.DENY  # Java's lenient form


def test_resource_lines() -> None:
    assert parse_resource_permission("topicA=DENY") == ("topicA", Permission.DENY)
    assert parse_resource_permission(" topicB = PUB|SUB ") == ("topicB", PUB_SUB)
    assert parse_resource_permission("groupA=SUB", is_topic=False) == (
        "%RETRY%groupA",
        Permission.SUB,
    )
    # StringUtils.split drops empty pieces, so Java accepts these too
    assert parse_resource_permission("t==PUB") == ("t", Permission.PUB)
    # String.trim() strips control characters too, but not U+00A0
    assert parse_resource_permission("\tt\x00=\nSUB\r") == ("t", Permission.SUB)
    assert parse_resource_permission("\u00a0t=SUB") == ("\u00a0t", Permission.SUB)


@pytest.mark.parametrize(
    "line", ["topicA", "topicA=PUB=SUB", "=", "topicA=", "topicA=ALL", " =PUB"]
)
def test_bad_resource_lines_name_the_text(line: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_resource_permission(line)
    assert repr(line) in str(info.value)
    assert "topic" in str(info.value)


def test_bad_group_line_says_group() -> None:
    with pytest.raises(ValueError, match="bad group permission 'g=X'"):
        parse_resource_permission("g=X", is_topic=False)


def model(needed: int, owned: int) -> bool:
    """Permission.checkPermission restated as sets of flags."""
    owned_set = {f for f in (1, 2, 4, 8) if owned & f}
    needed_set = {f for f in (1, 2, 4, 8) if needed & f}
    if 1 in owned_set:
        return False
    if 2 in needed_set:
        return bool(owned_set & {4, 8})
    return bool(needed_set & owned_set)


@given(st.integers(0, 15), st.integers(0, 15))
def test_check_permission_matches_model(needed: int, owned: int) -> None:
    assert check_permission(needed, owned) == model(needed, owned)


@pytest.mark.parametrize(
    ("needed", "owned", "ok"),
    [
        (Permission.PUB, Permission.PUB, True),
        (Permission.PUB, Permission.SUB, False),
        (Permission.SUB, PUB_SUB, True),
        (Permission.PUB, Permission.DENY, False),
        (Permission.PUB, PUB_SUB | Permission.DENY, False),
        (Permission.ANY, Permission.SUB, True),
        (Permission.ANY, Permission.PUB, True),
        (Permission.ANY, Permission.ANY, False),
        (Permission.DENY, Permission.DENY, False),
    ],
)
def test_check_permission_table(needed: int, owned: int, ok: bool) -> None:
    assert check_permission(needed, owned) is ok


def test_admin_codes() -> None:
    assert {17, 25, 215, 200, 207} == ADMIN_CODES_4_9
    assert ADMIN_CODES_4_9 | {513, 50, 51, 52} == ADMIN_CODES
    assert needs_admin(RequestCode.DELETE_TOPIC_IN_BROKER)
    assert not needs_admin(RequestCode.SEND_MESSAGE)
    assert not needs_admin(RequestCode.UPDATE_CONSUMER_OFFSET)
