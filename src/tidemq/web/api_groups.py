"""/api/groups: consumer groups, their members, progress, lag over time, offsets, dead letters.

    GET  /api/groups                    every subscription group of every master:
                                        settings, total lag, system or not
    GET  /api/groups/{group}            members (client id, address, language,
                                        version), subscriptions, per-queue offsets
                                        and lag, retry and dead-letter counts
    GET  /api/groups/{group}/history    lag over the last hour (this broker's
                                        queues; ?since=EPOCH_MS)
    POST /api/groups/{group}/reset      {"topic", "to": "earliest"|"latest"} or
                                        {"topic", "timestamp": ms|ISO} or
                                        {"topic", "offset", "queue"?, "broker"?}
    GET  /api/groups/{group}/dlq        the dead letters (%DLQ%group), oldest first
    POST /api/groups/{group}/dlq/{msg_id}/resend   give one back to the group

System groups are marked as rocketmq-dashboard marks them
(ConsumerServiceImpl.SYSTEM_GROUP_SET, and MixAll.isSysConsumerGroup's
CID_RMQ_SYS_ prefix).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tidemq.client.admin import AdminClient, AdminError, QueueOffset, QueueProgress
from tidemq.client.model import group_settings
from tidemq.common.names import dlq_topic_of, retry_topic_of
from tidemq.protocol.codes import ResponseCode
from tidemq.web.api_topics import PARALLEL, message_count
from tidemq.web.context import dashboard
from tidemq.web.errors import ApiError
from tidemq.web.params import json_body, optional_int, required, text, timestamp_ms
from tidemq.web.views import message_summary, send_result_view

__all__ = ["SYSTEM_GROUPS", "add_routes", "is_system_group"]

SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
    }
)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
DLQ_PAGE = 200


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


async def _progress(admin: AdminClient, group: str) -> list[QueueProgress]:
    try:
        return await admin.consumer_progress(group)
    except AdminError as exc:
        if exc.code in (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST):
            return []
        raise


async def _lag(admin: AdminClient, group: str, gate: asyncio.Semaphore) -> int | None:
    async with gate:
        try:
            return sum(row.lag for row in await _progress(admin, group))
        except AdminError:
            return None


async def list_groups(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    merged: dict[str, dict[str, Any]] = {}
    for config in await admin.list_groups():
        row = merged.setdefault(
            config.group_name,
            {
                "group": config.group_name,
                "system": is_system_group(config.group_name),
                "brokers": [],
                **config.settings(),
            },
        )
        row["brokers"].append(config.broker_name)
    gate = asyncio.Semaphore(PARALLEL)
    names = sorted(merged)
    lags = await asyncio.gather(*(_lag(admin, group, gate) for group in names))
    for name, lag in zip(names, lags, strict=True):
        merged[name]["lag"] = lag
    return web.json_response({"groups": [merged[name] for name in names]})


async def _topic_messages(admin: AdminClient, topic: str) -> int:
    try:
        return message_count(await admin.topic_status(topic))
    except AdminError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            return 0
        raise


async def group_detail(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    group = request.match_info["group"]
    configs = [c for c in await admin.list_groups() if c.group_name == group]
    progress = await _progress(admin, group)
    if not configs and not progress:
        raise ApiError(404, f"no consumer group {group}", "SUBSCRIPTION_GROUP_NOT_EXIST")
    connection = await admin.consumer_connection(group)
    retry_count, dlq_count = await asyncio.gather(
        _topic_messages(admin, retry_topic_of(group)), _topic_messages(admin, dlq_topic_of(group))
    )
    config = configs[0].config if configs else {}
    return web.json_response(
        {
            "group": group,
            "system": is_system_group(group),
            "brokers": [c.broker_name for c in configs],
            "config": {
                **group_settings(config),
                "consume_from_min": config.get("consumeFromMinEnable"),
            },
            **connection.to_json(),
            "queues": [
                {
                    "topic": row.topic,
                    "broker": row.broker_name,
                    "queue": row.queue_id,
                    "broker_offset": row.broker_offset,
                    "consumer_offset": row.consumer_offset,
                    "lag": row.lag,
                    "last_timestamp": row.last_timestamp,
                }
                for row in progress
            ],
            "total_lag": sum(row.lag for row in progress),
            "retry": {"topic": retry_topic_of(group), "messages": retry_count},
            "dlq": {"topic": dlq_topic_of(group), "messages": dlq_count},
        }
    )


async def group_history(request: web.Request) -> web.Response:
    dash = dashboard(request)
    dash.check(request)
    group = request.match_info["group"]
    since = timestamp_ms(request.query, "since")
    return web.json_response(
        {
            "group": group,
            "broker": dash.broker_name,
            "interval_s": dash.sampler.interval_s,
            "now": dash.clock.now_ms(),
            "lag": dash.sampler.history.series(f"group:{group}:lag", since),
            "last_error": dash.sampler.last_error,
        }
    )


def _reset_rows(rows: list[QueueOffset]) -> list[dict[str, Any]]:
    return [{"broker": r.broker_name, "queue": r.queue_id, "offset": r.offset} for r in rows]


async def reset_offset(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    group = request.match_info["group"]
    body = await json_body(request)
    topic = required(body, "topic")
    target = text(body, "to")
    when = timestamp_ms(body, "timestamp")
    offset = optional_int(body, "offset", low=0)
    given = [
        name
        for name, value in (("to", target), ("timestamp", when), ("offset", offset))
        if value is not None
    ]
    if not given:
        raise ApiError(400, "give one of to (earliest or latest), timestamp, or offset")
    if len(given) > 1:
        raise ApiError(400, f"give only one of {', '.join(given)}")
    if offset is not None:
        queue = optional_int(body, "queue", low=0)
        broker = text(body, "broker")
        if broker is not None and queue is None:
            raise ApiError(400, "broker goes with queue")
        rows = await admin.reset_offset_to(group, topic, offset, queue_id=queue, broker=broker)
        place = f"offset {offset}"
    elif target is not None:
        if target.lower() not in ("earliest", "latest"):
            raise ApiError(400, f"to must be earliest or latest, not {target!r}")
        rows = await admin.reset_offset(group, topic, 0 if target.lower() == "earliest" else -1)
        place = target.lower()
    else:
        assert when is not None
        if when < 0:
            raise ApiError(400, "timestamp must not be negative")
        rows = await admin.reset_offset(group, topic, when)
        place = f"time {when}"
    return web.json_response(
        {"group": group, "topic": topic, "reset_to": place, "offsets": _reset_rows(rows)}
    )


async def dead_letters(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    group = request.match_info["group"]
    limit = optional_int(request.query, "max", low=1, high=1000) or DLQ_PAGE
    topic = dlq_topic_of(group)
    found = await admin.dead_letters(group, limit)
    rows = []
    for message in found.messages:
        row = message_summary(message)
        row["origin_topic"] = message.properties.get("RETRY_TOPIC")
        rows.append(row)
    return web.json_response({"topic": topic, "messages": rows, "cut": found.cut})


async def resend(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    group = request.match_info["group"]
    msg_id = request.match_info["msg_id"]
    result = await admin.resend_dead_letter(group, msg_id)
    return web.json_response(send_result_view(result), status=201)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/groups", list_groups)
    app.router.add_get("/api/groups/{group}", group_detail)
    app.router.add_get("/api/groups/{group}/history", group_history)
    app.router.add_post("/api/groups/{group}/reset", reset_offset)
    app.router.add_get("/api/groups/{group}/dlq", dead_letters)
    app.router.add_post("/api/groups/{group}/dlq/{msg_id}/resend", resend)
