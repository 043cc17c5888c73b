"""The checks before anything is read for a consumer, shared by pull and pop.

PullMessageProcessor's order (rocketmq-all 4.9.7): the group exists and may
consume, the topic exists and may be read; then the subscription's filter,
TAG or (when the broker has a SQL92 compiler) SQL92.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tidemq.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.permission import BrokerPermission
from tidemq.broker.requests import BrokerError
from tidemq.broker.topics import TopicConfig, TopicConfigManager, is_readable
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.heartbeat import EXPRESSION_TAG
from tidemq.store.api import MessageFilter
from tidemq.store.filters import TagFilter

__all__ = ["ConsumeChecks", "SqlFilterFactory"]

SqlFilterFactory = Callable[[str], MessageFilter]
"""Builds the read filter of a SQL92 expression; ValueError when it does not parse."""


@functools.lru_cache(maxsize=1024)
def _tag_filter(expression: str | None) -> TagFilter | None:
    """The (shared, immutable) filter of a tag expression; None matches everything."""
    tag_filter = TagFilter.from_expression(expression)
    return None if tag_filter.matches_everything else tag_filter


class ConsumeChecks:
    """May this group read this topic, and with which filter."""

    def __init__(
        self,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        sql_filter_factory: SqlFilterFactory | None = None,
        *,
        permission: BrokerPermission | None = None,
    ) -> None:
        self.topics = topics
        self.groups = groups
        self.permission = permission
        """brokerPermission: reads are refused while it has no read bit (None: never)."""
        self.sql_filter_factory = sql_filter_factory
        """Builds SQL92 filters; without it SQL92 subscriptions are refused (as Java)."""

    def readable(
        self, group: str, topic: str, what: str = "pulling"
    ) -> tuple[SubscriptionGroupConfig, TopicConfig]:
        """The configs of a group that may consume and a topic that may be read
        (`what`: "pulling" or "pop", for the broker-wide refusal's words)."""
        if self.permission is not None:
            self.permission.check_read(what)
        group_config = self.groups.find(group)
        if group_config is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not group_config.consume_enable:
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        config = self.topics.get(topic)
        if config is None:
            raise BrokerError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not is_readable(config.perm):
            raise BrokerError(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        return group_config, config

    def message_filter(self, expression: str | None, expression_type: str) -> MessageFilter | None:
        """The filter of a TAG or SQL92 subscription (None: everything)."""
        if expression_type.upper() != EXPRESSION_TAG:
            if self.sql_filter_factory is None:
                raise BrokerError(
                    ResponseCode.SYSTEM_ERROR,
                    f"The broker does not support consumer to filter message by {expression_type}",
                )
            try:
                return self.sql_filter_factory(expression or "")
            except ValueError as exc:
                raise BrokerError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
        return _tag_filter(expression)
