"""SQL92 subscriptions on pull: the compiled expression as the store's property
predicate, so properties are read from the commitlog only for records the
consumequeue scan let through (a SQL92 subscription has no tag codes)."""

from __future__ import annotations

from tidemq.filter.sql92 import compile_sql92
from tidemq.store.filters import TagFilter


def sql92_message_filter(expression: str) -> TagFilter:
    """The read filter of a SQL92 subscription; SqlFilterError (a ValueError,
    position in its text) when the expression does not parse."""
    return TagFilter(None, compile_sql92(expression).evaluate)
