"""Topic and group names: RocketMQ's TopicValidator rules, and the store's
last check that a name is one plain directory name."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.names import (
    GROUP_MAX_LENGTH,
    RETRY_OR_DLQ_TOPIC_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    is_safe_path_component,
    validate_group_name,
    validate_topic_name,
)

JAVA_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
names = st.text(max_size=300) | st.text(alphabet="%|aZ09_-./ \x00", max_size=300)


@given(names)
def test_topic_rule_is_javas(name: str) -> None:
    limit = (
        RETRY_OR_DLQ_TOPIC_MAX_LENGTH if name.startswith(("%RETRY%", "%DLQ%")) else TOPIC_MAX_LENGTH
    )
    valid = JAVA_PATTERN.fullmatch(name) is not None and len(name) <= limit
    assert (validate_topic_name(name) is None) == valid


@given(names)
def test_group_rule_is_javas(name: str) -> None:
    valid = JAVA_PATTERN.fullmatch(name) is not None and len(name) <= GROUP_MAX_LENGTH
    assert (validate_group_name(name) is None) == valid


@given(names)
def test_every_valid_name_is_a_safe_directory_name(name: str) -> None:
    if validate_topic_name(name) is None:
        assert is_safe_path_component(name)


@given(st.text(max_size=400))
def test_safe_names_cannot_leave_their_directory(name: str) -> None:
    if is_safe_path_component(name):
        assert name not in ("", ".", "..")
        assert "/" not in name and "\x00" not in name
        assert len(name.encode()) <= 255


def test_remarks_are_short_for_huge_names() -> None:
    problem = validate_topic_name("/" * 100_000)
    assert problem is not None and "illegal characters" in problem and len(problem) < 200
    assert validate_topic_name("") == "The specified topic is blank."
    assert validate_group_name(" ") == "The specified group is blank."
    long_group = validate_group_name("g" * (GROUP_MAX_LENGTH + 1))
    assert long_group is not None and "longer than the maximum of 120" in long_group
    assert validate_topic_name("%RETRY%" + "g" * 200) is None
