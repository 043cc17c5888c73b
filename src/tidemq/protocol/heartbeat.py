"""The HEART_BEAT body (RocketMQ's HeartbeatData): what a client declares about
its producer and consumer groups, and how the broker reads it back.

Clients build it with :meth:`HeartbeatData.to_json`; the broker parses it
with :func:`parse_heartbeat`, which accepts what ali-ons and Java send.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tidemq.common.tags import SUB_ALL

CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
MAX_GROUPS_PER_HEARTBEAT = 1024
MAX_SUBSCRIPTIONS_PER_GROUP = 1024


# -- heartbeat body -------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Subscription:
    """RocketMQ's SubscriptionData, as a consumer declared it."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subString": self.sub_string,
            "classFilterMode": self.class_filter_mode,
            "tagsSet": list(self.tags_set),
            "codeSet": list(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }

    def same_filter(self, other: Subscription) -> bool:
        return (self.sub_string, self.expression_type, self.tags_set) == (
            other.sub_string,
            other.expression_type,
            other.tags_set,
        )


@dataclass(slots=True, frozen=True)
class ConsumerData:
    group_name: str
    consume_type: str = CONSUME_PASSIVELY
    message_model: str = CLUSTERING
    consume_from_where: str = CONSUME_FROM_LAST_OFFSET
    subscriptions: tuple[Subscription, ...] = ()
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass(slots=True, frozen=True)
class HeartbeatData:
    client_id: str
    consumers: tuple[ConsumerData, ...] = ()
    producer_groups: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumers],
            "producerDataSet": [{"groupName": g} for g in self.producer_groups],
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()


def parse_heartbeat(body: bytes) -> HeartbeatData:
    """Decode a HEART_BEAT body; ValueError with a readable message if malformed."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"heartbeat body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("heartbeat body must be a JSON object")
    client_id = document.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise ValueError("heartbeat body has no clientID")
    consumers = [
        _parse_consumer(raw) for raw in _list(document, "consumerDataSet", MAX_GROUPS_PER_HEARTBEAT)
    ]
    producers = []
    for raw in _list(document, "producerDataSet", MAX_GROUPS_PER_HEARTBEAT):
        if not isinstance(raw, dict) or not isinstance(raw.get("groupName"), str):
            raise ValueError("a producerDataSet entry needs a groupName")
        producers.append(raw["groupName"])
    return HeartbeatData(client_id, tuple(consumers), tuple(producers))


def _list(document: dict[str, Any], key: str, limit: int) -> list[Any]:
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list")
    if len(value) > limit:
        raise ValueError(f"{key} has {len(value)} entries, more than {limit}")
    return value


def _parse_consumer(raw: object) -> ConsumerData:
    if not isinstance(raw, dict) or not isinstance(raw.get("groupName"), str):
        raise ValueError("a consumerDataSet entry needs a groupName")
    subscriptions = [
        _parse_subscription(item)
        for item in _list(raw, "subscriptionDataSet", MAX_SUBSCRIPTIONS_PER_GROUP)
    ]
    return ConsumerData(
        group_name=raw["groupName"],
        consume_type=str(raw.get("consumeType") or CONSUME_PASSIVELY),
        message_model=str(raw.get("messageModel") or CLUSTERING),
        consume_from_where=str(raw.get("consumeFromWhere") or CONSUME_FROM_LAST_OFFSET),
        subscriptions=tuple(subscriptions),
        unit_mode=bool(raw.get("unitMode", False)),
    )


def _parse_subscription(raw: object) -> Subscription:
    if not isinstance(raw, dict) or not isinstance(raw.get("topic"), str):
        raise ValueError("a subscriptionDataSet entry needs a topic")
    tags = raw.get("tagsSet") or []
    codes = raw.get("codeSet") or []
    if not isinstance(tags, list) or not isinstance(codes, list):
        raise ValueError("tagsSet and codeSet must be lists")
    try:
        sub_version = int(raw.get("subVersion") or 0)
        code_set = tuple(int(code) for code in codes)
    except (TypeError, ValueError):
        raise ValueError("subVersion and codeSet must be integers") from None
    return Subscription(
        topic=raw["topic"],
        sub_string=str(raw.get("subString") or SUB_ALL),
        tags_set=tuple(str(tag) for tag in tags),
        code_set=code_set,
        sub_version=sub_version,
        expression_type=str(raw.get("expressionType") or EXPRESSION_TAG),
        class_filter_mode=bool(raw.get("classFilterMode", False)),
    )
