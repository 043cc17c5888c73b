"""Admin request headers (Java field names) for the broker's admin codes.

The broker decodes them and the admin client encodes them, so they live once,
here, beside the other headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemq.protocol.headers import Int32, Int64, wire


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicRequestHeader:
    """GET_TOPIC_STATS_INFO (202), QUERY_TOPIC_CONSUME_BY_WHO (300), GET_TOPIC_CONFIG (351)."""

    topic: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GetConsumeStatsRequestHeader:
    consumer_group: str
    topic: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307), to a broker that asks the client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumeMessageDirectlyRequestHeader:
    """CONSUME_MESSAGE_DIRECTLY (309): Java's ConsumeMessageDirectlyResultRequestHeader."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumerGroupRequestHeader:
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ProducerGroupRequestHeader:
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteSubscriptionGroupRequestHeader:
    group_name: str
    clean_offset: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class GetSubscriptionGroupConfigRequestHeader:
    group: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str
    group: str
    timestamp: Int64
    is_force: bool = field(default=True, metadata=wire("isForce"))
    queue_id: Int32 = -1
    offset: Int64 | None = -1
