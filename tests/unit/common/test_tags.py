"""Tag expressions: Java's FilterAPI.buildSubscriptionData rules, and the
client, the broker's filter and the store reading an expression the same way."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.common.hashing import java_string_hash, tag_code
from tidemq.common.tags import (
    java_trim,
    parse_tag_expression,
    tag_codes,
    tag_expression_problem,
    tag_matches,
)
from tidemq.store.filters import TagFilter


def java_string_trim(text: str) -> str:
    """String.trim as Java writes it: skip chars <= ' ' from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while start < end and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def java_build_subscription(sub_string: str | None) -> frozenset[str] | None:
    """FilterAPI.buildSubscriptionData's tagsSet, None when subString is SUB_ALL."""
    if sub_string is None or sub_string == "" or sub_string == "*":
        return None
    tags = (java_string_trim(tag) for tag in re.split(r"\|\|", sub_string))
    return frozenset(tag for tag in tags if tag)


# Expressions made of the characters the rules turn on, and any text at all.
expressions = (
    st.text(alphabet="|* \t\n\x00\x1f\x7f\u3000aB", max_size=20)
    | st.text(max_size=20)
    | st.lists(st.sampled_from(["TagA", "TagB", "*", "", " ", "|"]), max_size=5).map(" || ".join)
)
tags = (
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="|"))
    .map(java_trim)
    .filter(bool)
)
blanks = st.text(alphabet=" \t\r\n\x00\x0b", max_size=3)


@pytest.mark.parametrize("expression", [None, "", "*"])
def test_none_empty_and_star_mean_every_tag(expression: str | None) -> None:
    assert parse_tag_expression(expression) is None
    assert tag_matches(None, None)
    assert tag_matches(None, "TagA")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("TagA", {"TagA"}),
        ("TagA||TagB", {"TagA", "TagB"}),
        ("  TagB || TagA  ", {"TagA", "TagB"}),
        ("\tTagA\n", {"TagA"}),
        ("TagA ||", {"TagA"}),
        ("TagA || || TagA", {"TagA"}),
        ("a|b", {"a|b"}),
        ("a|||b", {"a", "|b"}),
        # Java compares the whole string with "*" before trimming anything:
        (" * ", {"*"}),
        ("TagA || *", {"TagA", "*"}),
        # and a blank expression leaves no tag, so the broker matches nothing:
        ("   ", set()),
        ("||", set()),
        # String.trim stops at U+0020: other blanks are part of the tag.
        ("\u3000TagA", {"\u3000TagA"}),
    ],
)
def test_javas_reading(expression: str, expected: set[str]) -> None:
    assert parse_tag_expression(expression) == frozenset(expected)


@given(expressions)
def test_parser_is_javas_build_subscription_data(expression: str) -> None:
    assert parse_tag_expression(expression) == java_build_subscription(expression)
    assert java_trim(expression) == java_string_trim(expression)


@given(st.sets(tags, min_size=1, max_size=6), st.data())
def test_joined_tags_parse_back(tag_set: set[str], data: st.DataObject) -> None:
    parts = [data.draw(blanks) + tag + data.draw(blanks) for tag in sorted(tag_set)]
    expression = "||".join(parts)
    parsed = parse_tag_expression(expression)
    if expression == "*":
        assert parsed is None
    else:
        assert parsed == frozenset(tag_set)


@given(expressions, st.none() | tags | st.sampled_from(["TagA", "*", ""]))
def test_the_broker_never_drops_what_the_client_keeps(expression: str, tag: str | None) -> None:
    """The store's hash check is a superset of the client's exact check."""
    wanted = parse_tag_expression(expression)
    broker = TagFilter.from_expression(expression)
    assert broker.matches_everything == (wanted is None)
    if tag_matches(wanted, tag):
        assert broker.matches_tags_code(tag_code(tag))
    if wanted is not None:
        assert set(tag_codes(wanted)) == {java_string_hash(t) for t in wanted}


@given(expressions)
def test_client_and_broker_read_a_subscription_alike(expression: str) -> None:
    """What the client accepts, the broker reads back from the heartbeat's
    subString as the client meant it, with the client's codeSet."""
    try:
        spec = SubscriptionSpec.parse("T", expression, sub_version=0)
    except ValueError:
        assert tag_expression_problem(java_trim(expression)) is not None
        return
    wire = spec.to_wire()
    assert parse_tag_expression(wire.sub_string) == spec.tags
    assert wire.code_set == tag_codes(wire.tags_set)
    if spec.tags is not None:
        assert spec.tags and "*" not in spec.tags


@given(st.lists(tags, min_size=1, max_size=5))
def test_the_client_refuses_only_what_java_would_read_as_a_surprise(parts: list[str]) -> None:
    expression = " || ".join(parts)
    problem = tag_expression_problem(expression)
    surprising = len(parts) > 1 and "*" in parts
    assert (problem is not None) == surprising
    with_empty = expression + " || "
    assert tag_expression_problem(with_empty) is not None
    assert parse_tag_expression(with_empty) == parse_tag_expression(expression)


def test_tag_matches_is_exact() -> None:
    # "Aa" and "BB" share a hash code: the broker lets both through, the client does not.
    wanted = parse_tag_expression("Aa")
    assert tag_code("Aa") == tag_code("BB")
    assert TagFilter.from_expression("Aa").matches_tags_code(tag_code("BB"))
    assert tag_matches(wanted, "Aa")
    assert not tag_matches(wanted, "BB")
    assert not tag_matches(wanted, None)
    assert not tag_matches(frozenset(), "Aa")
