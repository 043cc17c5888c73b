"""Read filters and the consumequeue tag-slot rule.

The tag slot of a consumequeue entry holds the Java hashCode of the TAGS
property, except in the delay topic, where it holds the delivery time so the
scheduler can tell whether the head of a level is due without reading the
commitlog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from tidemq.common import properties as props
from tidemq.common.hashing import tag_code
from tidemq.common.tags import parse_tag_expression, tag_codes
from tidemq.store.config import SCHEDULE_TOPIC, TIMER_TOPIC, parse_delay_levels


def make_tags_code_rule(delay_levels: str) -> Callable[[str, Mapping[str, str], int], int]:
    levels = parse_delay_levels(delay_levels)

    def tags_code_for(topic: str, properties: Mapping[str, str], store_timestamp: int) -> int:
        if topic == SCHEDULE_TOPIC:
            try:
                level = int(properties.get(props.DELAY, "1"))
            except ValueError:
                level = 1
            level = min(max(level, 1), len(levels))
            return store_timestamp + levels[level - 1]
        if topic == TIMER_TOPIC:
            try:
                return int(properties.get(props.TIMER_OUT_MS, ""))
            except ValueError:
                return store_timestamp
        return tag_code(properties.get(props.TAGS))

    return tags_code_for


class PropertyPredicate(Protocol):
    def __call__(self, properties: Mapping[str, str]) -> bool: ...


class TagFilter:
    """A TAG subscription: '*' (everything) or 'TagA || TagB' by hash code.

    Hash codes can collide: the client re-checks the tag string, as RocketMQ's
    clients do. An optional property predicate (SQL92 later) is checked on
    the record's properties for survivors of the tag check.
    """

    def __init__(
        self,
        codes: Iterable[int] | None = None,
        predicate: PropertyPredicate | None = None,
    ) -> None:
        self._codes = None if codes is None else frozenset(codes)
        self._predicate = predicate

    @classmethod
    def from_expression(cls, expression: str | None) -> TagFilter:
        """The filter of a TAG subscription as a client sent it (Java's rules:
        `tidemq.common.tags`; a blank expression matches nothing)."""
        tags = parse_tag_expression(expression)
        return cls(None if tags is None else tag_codes(tags))

    @property
    def matches_everything(self) -> bool:
        return self._codes is None and self._predicate is None

    def matches_tags_code(self, tags_code: int) -> bool:
        return self._codes is None or tags_code in self._codes

    @property
    def needs_properties(self) -> bool:
        return self._predicate is not None

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        if self._predicate is None:
            return True
        return properties is not None and self._predicate(properties)
