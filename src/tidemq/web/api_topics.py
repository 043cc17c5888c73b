"""/api/topics: list, create, change, delete, look into, send a test message.

    GET    /api/topics                 every topic of every master: kind, message
                                       type, brokers, queues, permission, messages
                                       stored, put rate (this broker's, last sample)
    POST   /api/topics                 {"name", "queues"=4, "perm"=6, "type"?}: create
                                       on every master (an existing one is updated)
    GET    /api/topics/{topic}         route, per-queue min/max offsets, message type,
                                       put rate history (this broker)
    PUT    /api/topics/{topic}         {"queues" | "read_queues" | "write_queues" | "perm"}
    DELETE /api/topics/{topic}         from its brokers and the name servers
    POST   /api/topics/{topic}/messages  {"body", "tags"?, "keys"?, "properties"?}: send one

The same admin calls as `tidemq topic ...` and `tidemq send`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from tidemq.client.admin import AdminClient, AdminError, QueueStatus
from tidemq.common.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from tidemq.protocol.codes import ResponseCode
from tidemq.web.context import dashboard
from tidemq.web.errors import ApiError
from tidemq.web.params import json_body, optional_int, required, text, timestamp_ms
from tidemq.web.views import perm_view, send_result_view, topic_kind

__all__ = ["add_routes", "message_count"]

PARALLEL = 8
"""Topic status requests in flight at once while listing."""
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


def message_count(rows: list[QueueStatus]) -> int:
    """Messages a topic holds now: max - min offset, summed over its queues."""
    return sum(max(0, r.max_offset - r.min_offset) for r in rows)


async def _count(admin: AdminClient, topic: str, gate: asyncio.Semaphore) -> int | None:
    async with gate:
        try:
            return message_count(await admin.topic_status(topic))
        except AdminError:
            return None


def _reserved_names(configs: Mapping[str, Mapping[str, Any]], clusters: list[str]) -> set[str]:
    return set(configs) | set(clusters)


def _declared_type(config: Mapping[str, Any]) -> str:
    attributes = config.get("attributes")
    declared = attributes.get("message.type") if isinstance(attributes, dict) else None
    return str(declared or "NORMAL").upper()


async def list_topics(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    info = await admin.cluster_info()
    configs = await admin.all_topic_configs()
    reserved = _reserved_names(configs, list(info.clusters))
    merged: dict[str, dict[str, Any]] = {}
    for broker, table in sorted(configs.items()):
        for topic, config in table.items():
            row = merged.setdefault(
                topic,
                {
                    "topic": topic,
                    "kind": topic_kind(topic, reserved),
                    "brokers": [],
                    "read_queues": 0,
                    "write_queues": 0,
                    "perm": perm_view(int(config.get("perm", 6))),
                    "types": set(),
                },
            )
            row["brokers"].append(broker)
            row["read_queues"] += int(config.get("readQueueNums", 0))
            row["write_queues"] += int(config.get("writeQueueNums", 0))
            row["types"].add(_declared_type(config))
    gate = asyncio.Semaphore(PARALLEL)
    names = sorted(merged)
    counts = await asyncio.gather(*(_count(admin, topic, gate) for topic in names))
    history = dash.sampler.history
    rows = []
    for topic, count in zip(names, counts, strict=True):
        row = merged[topic]
        last = history.series(f"topic:{topic}:put")[-1:]
        row["type"] = "/".join(sorted(row.pop("types")))
        row["messages"] = count
        row["put_rate"] = last[0][1] if last else None
        rows.append(row)
    return web.json_response({"topics": rows})


def _check_sendable(topic: str) -> None:
    for prefix, what in (
        (RETRY_GROUP_TOPIC_PREFIX, "retry"),
        (DLQ_GROUP_TOPIC_PREFIX, "dead-letter"),
    ):
        if topic.startswith(prefix):
            raise ApiError(
                400,
                f"{topic} is the {what} topic of consumer group {topic[len(prefix) :]}: the "
                "broker puts messages there; send to the topic the group subscribes to",
            )


async def create_topic(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    body = await json_body(request)
    name = required(body, "name")
    queues = optional_int(body, "queues", low=1, high=1024) or 4
    perm = optional_int(body, "perm", low=0, high=7)
    kind = text(body, "type")
    attributes = None
    if kind is not None:
        if kind.upper() not in MESSAGE_TYPES:
            raise ApiError(400, f"type must be one of {', '.join(MESSAGE_TYPES)}, not {kind!r}")
        attributes = {"+message.type": kind.upper()}
    before = await admin.existing_queues(name)
    brokers = await admin.create_topic(
        name, queues=queues, perm=6 if perm is None else perm, cluster=None, attributes=attributes
    )
    return web.json_response(
        {"topic": name, "brokers": brokers, "result": "updated" if before else "created"},
        status=200 if before else 201,
    )


async def topic_detail(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    topic = request.match_info["topic"]
    route = await admin.topic_route(topic)
    status = await admin.topic_status(topic)
    kind = await admin.topic_message_type(topic)
    since = timestamp_ms(request.query, "since")
    return web.json_response(
        {
            "topic": topic,
            "type": kind,
            "kind": topic_kind(topic),
            "route": {
                "queues": [
                    {
                        "broker": q.broker_name,
                        "read_queues": q.read_queue_nums,
                        "write_queues": q.write_queue_nums,
                        "perm": perm_view(q.perm),
                    }
                    for q in route.queue_datas
                ],
                "brokers": [
                    {
                        "broker": b.broker_name,
                        "cluster": b.cluster,
                        "addresses": {str(k): v for k, v in sorted(b.addrs.items())},
                    }
                    for b in route.broker_datas
                ],
            },
            "queues": [
                {
                    "broker": r.broker_name,
                    "queue": r.queue_id,
                    "min_offset": r.min_offset,
                    "max_offset": r.max_offset,
                    "last_update_timestamp": r.last_update_timestamp,
                }
                for r in status
            ],
            "messages": message_count(status),
            "put_rate_history": dash.sampler.history.series(f"topic:{topic}:put", since),
        }
    )


async def update_topic(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    topic = request.match_info["topic"]
    body = await json_body(request)
    changes = {
        "queues": optional_int(body, "queues", low=1, high=1024),
        "read_queues": optional_int(body, "read_queues", low=1, high=1024),
        "write_queues": optional_int(body, "write_queues", low=1, high=1024),
        "perm": optional_int(body, "perm", low=0, high=7),
    }
    if all(value is None for value in changes.values()):
        raise ApiError(400, "give at least one of queues, read_queues, write_queues, perm")
    updated = await admin.update_topic(topic, **changes)
    return web.json_response(
        {
            "topic": topic,
            "brokers": [
                {
                    "broker": q.broker_name,
                    "read_queues": q.read_queue_nums,
                    "write_queues": q.write_queue_nums,
                    "perm": perm_view(q.perm),
                }
                for q in updated
            ],
        }
    )


async def delete_topic(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    topic = request.match_info["topic"]
    brokers = await admin.delete_topic(topic)
    return web.json_response({"topic": topic, "deleted_from": brokers})


def _properties(body: Mapping[str, Any]) -> dict[str, str] | None:
    raw = body.get("properties")
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ApiError(400, "properties must be an object of text values")
    return raw


async def send_message(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    topic = request.match_info["topic"]
    _check_sendable(topic)
    body = await json_body(request)
    payload = body.get("body")
    if not isinstance(payload, str) or not payload:
        raise ApiError(400, "body is required: the message text")
    try:
        result = await admin.send(
            topic,
            payload.encode("utf-8"),
            text(body, "tags"),
            text(body, "keys"),
            _properties(body),
        )
    except ValueError as exc:
        raise AdminError(str(exc), ResponseCode.MESSAGE_ILLEGAL) from None
    return web.json_response(send_result_view(result), status=201)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/topics", list_topics)
    app.router.add_post("/api/topics", create_topic)
    app.router.add_get("/api/topics/{topic}", topic_detail)
    app.router.add_put("/api/topics/{topic}", update_topic)
    app.router.add_delete("/api/topics/{topic}", delete_topic)
    app.router.add_post("/api/topics/{topic}/messages", send_message)
