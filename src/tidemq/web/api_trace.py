"""/api/messages/{msg_id}/trace: a message's trace as the dashboard draws it.

    GET /api/messages/{msg_id}/trace[?trace_topic=T]

The timeline is read as `tidemq message trace` reads it (client.trace
`trace_timeline`, from the broker's `msg_trace_topic_name` unless
`trace_topic` says otherwise) and answered whole (`Timeline.to_json`) with
one more field, `events`: the same facts flattened into one list, oldest
first, which is what the page shows (docs/dashboard.md gives its shape). No
trace record of the message: 404, so the page can say "no trace".
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tidemq.client.trace.reader import trace_timeline
from tidemq.client.trace.timeline import Timeline
from tidemq.web.context import dashboard
from tidemq.web.errors import ApiError
from tidemq.web.params import text

__all__ = ["add_routes", "trace_events"]


def trace_events(timeline: Timeline) -> list[dict[str, Any]]:
    """The timeline's steps as one list of events, oldest first (a stable sort:
    steps of the same millisecond keep the order they happen in)."""
    events: list[dict[str, Any]] = []
    for sent in timeline.sent:
        events.append(
            _event(
                "SEND",
                sent.timestamp_ms,
                sent.group,
                sent.client_host,
                sent.success,
                sent.cost_ms,
                0,
            )
        )
    stored = timeline.stored
    if stored is not None and stored.store_timestamp_ms is not None:
        events.append(
            _event("STORE", stored.store_timestamp_ms, None, stored.store_host, True, None, 0)
        )
    for step in timeline.transactions:
        event = _event(
            "END_TRANSACTION", step.timestamp_ms, step.group, step.client_host, None, None, 0
        )
        event["state"] = step.state
        events.append(event)
    for group in timeline.groups:
        for delivery in group.deliveries:
            events.append(
                _event(
                    "CONSUME",
                    delivery.timestamp_ms,
                    group.group,
                    delivery.client_host,
                    delivery.success,
                    delivery.cost_ms,
                    delivery.retry_times,
                )
            )
        letter = group.dead_letter
        if letter is not None:
            event = _event(
                "DLQ", letter.store_timestamp_ms, group.group, None, None, None, group.retries
            )
            event["dlq_topic"] = letter.topic
            events.append(event)
    for recall in timeline.recalls:
        events.append(
            _event(
                "RECALL",
                recall.timestamp_ms,
                recall.group,
                recall.client_host,
                recall.success,
                None,
                0,
            )
        )
    events.sort(key=lambda event: event["time"])
    return events


def _event(
    kind: str,
    time_ms: int,
    group: str | None,
    client_host: str | None,
    success: bool | None,
    cost_ms: int | None,
    retry_times: int,
) -> dict[str, Any]:
    status = None if success is None else ("SUCCESS" if success else "FAILED")
    return {
        "type": kind,
        "time": time_ms,
        "group": group,
        "client_host": client_host,
        "status": status,
        "cost_ms": cost_ms,
        "retry_times": retry_times,
    }


async def trace(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    topic = text(request.query, "trace_topic") or dash.core.service.config.msg_trace_topic_name
    try:
        timeline = await trace_timeline(admin, request.match_info["msg_id"], topic)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    if not timeline.found:
        notes = "; ".join(timeline.notes)
        raise ApiError(
            404, f"no trace of {timeline.msg_id} in {topic}" + (f" ({notes})" if notes else "")
        )
    return web.json_response({**timeline.to_json(), "events": trace_events(timeline)})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/messages/{msg_id}/trace", trace)
