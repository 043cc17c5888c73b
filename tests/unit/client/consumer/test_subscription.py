"""SubscriptionSpec: parsing, the exact client-side tag check, the heartbeat form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.common.hashing import java_string_hash
from tidemq.common.message import MessageExt
from tidemq.common.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic_of,
    retry_topic_of,
)
from tidemq.common.tags import java_trim


def message(tags: str | None) -> MessageExt:
    msg = MessageExt(topic="T", body=b"x")
    msg.tags = tags
    return msg


def test_group_topics() -> None:
    assert retry_topic_of("cg") == "%RETRY%cg" == RETRY_GROUP_TOPIC_PREFIX + "cg"
    assert dlq_topic_of("cg") == "%DLQ%cg" == DLQ_GROUP_TOPIC_PREFIX + "cg"


@pytest.mark.parametrize("expression", [None, "", "  ", "*", " * "])
def test_star_and_empty_mean_every_tag(expression: str | None) -> None:
    spec = SubscriptionSpec.parse("T", expression, sub_version=7)
    assert spec.expression == "*"
    assert spec.tags is None
    assert spec.matches(message(None))
    assert spec.matches(message("anything"))
    wire = spec.to_wire()
    assert (wire.sub_string, wire.tags_set, wire.code_set) == ("*", (), ())
    assert wire.sub_version == 7
    assert wire.expression_type == "TAG"


def test_tag_list_is_parsed_and_matched_exactly() -> None:
    spec = SubscriptionSpec.parse("T", " TagB || TagA ", sub_version=1)
    assert spec.expression == "TagB || TagA"
    assert spec.tags == frozenset({"TagA", "TagB"})
    assert spec.matches(message("TagA"))
    assert spec.matches(message("TagB"))
    assert not spec.matches(message("TagC"))
    assert not spec.matches(message(None))
    assert not spec.matches(message("taga"))


def test_hash_collisions_are_told_apart() -> None:
    # "Aa" and "BB" share Java's String.hashCode: the broker lets both through.
    assert java_string_hash("Aa") == java_string_hash("BB")
    spec = SubscriptionSpec.parse("T", "Aa", sub_version=1)
    assert spec.matches(message("Aa"))
    assert not spec.matches(message("BB"))


def test_wire_form_has_sorted_tags_and_java_hashes() -> None:
    wire = SubscriptionSpec.parse("T", "TagB||TagA", sub_version=42).to_wire()
    assert wire.topic == "T"
    assert wire.sub_string == "TagB||TagA"
    assert wire.tags_set == ("TagA", "TagB")
    assert wire.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert wire.to_json()["subVersion"] == 42


def test_java_hash_value_of_a_known_tag() -> None:
    # "TagA".hashCode() in Java.
    assert SubscriptionSpec.parse("T", "TagA", sub_version=0).to_wire().code_set == (2598919,)


def test_sql92_is_left_to_the_broker() -> None:
    spec = SubscriptionSpec.parse("T", " a > 5 ", "sql92", sub_version=3)
    assert spec.expression_type == "SQL92"
    assert spec.expression == "a > 5"
    assert spec.tags is None
    assert spec.matches(message("whatever"))
    wire = spec.to_wire()
    assert (wire.sub_string, wire.expression_type, wire.tags_set) == ("a > 5", "SQL92", ())


@pytest.mark.parametrize(
    ("topic", "expression", "kind", "complaint"),
    [
        ("", "*", "TAG", "needs a topic"),
        ("   ", "*", "TAG", "needs a topic"),
        (" T", "*", "TAG", "surrounding blanks"),
        ("T" * 128, "*", "TAG", "longer than 127"),
        ("T", "*", "REGEX", "not supported"),
        ("T", "", "SQL92", "SQL92 expression"),
        ("T", "TagA ||", "TAG", "empty tag"),
        ("T", "TagA || || TagB", "TAG", "empty tag"),
        ("T", "TagA || *", "TAG", "mixes '*'"),
    ],
)
def test_bad_subscriptions_are_refused_readably(
    topic: str, expression: str, kind: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        SubscriptionSpec.parse(topic, expression, kind, sub_version=0)


tag_text = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="|*"),
        min_size=1,
        max_size=8,
    )
    .map(java_trim)
    .filter(bool)
)


@given(st.sets(tag_text, min_size=1, max_size=5), tag_text)
def test_matches_is_set_membership(tags: set[str], candidate: str) -> None:
    spec = SubscriptionSpec.parse("T", " || ".join(sorted(tags)), sub_version=0)
    assert spec.tags == frozenset(tags)
    assert spec.matches(message(candidate)) == (candidate in tags)
    wire = spec.to_wire()
    assert list(wire.tags_set) == sorted(tags)
    assert wire.code_set == tuple(java_string_hash(tag) for tag in sorted(tags))
