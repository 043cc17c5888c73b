"""/api/messages: find messages by key, by id, or by the time they were stored.

    GET /api/messages?topic=T&key=K[&max=64]             by key (KEYS), newest `max`
    GET /api/messages?topic=T&begin=TIME&end=TIME[&max=]  stored in [begin, end]
                                                          (epoch ms or ISO-8601)
    GET /api/messages/{msg_id}[?topic=T]                  one message whole: every
                                                          property, the body as text,
                                                          pretty JSON, or hex

`msg_id` is either id: the offset id (the broker's: found without a topic)
or the client id (UNIQ_KEY, what a send prints: needs the topic), as
`tidemq message query` takes them. The message's trace is
/api/messages/{msg_id}/trace (docs/dashboard.md gives its shape).
"""

from __future__ import annotations

from aiohttp import web

from tidemq.client.admin import AdminError
from tidemq.web.context import dashboard
from tidemq.web.errors import ApiError
from tidemq.web.params import optional_int, required, text, timestamp_ms
from tidemq.web.views import message_summary, message_view

__all__ = ["add_routes"]

DEFAULT_MAX = 64
HOUR_MS = 3_600_000


async def search(request: web.Request) -> web.Response:
    dash = dashboard(request)
    query = request.query
    topic = required(query, "topic")
    key = text(query, "key")
    begin = timestamp_ms(query, "begin")
    end = timestamp_ms(query, "end")
    limit = optional_int(query, "max", low=1, high=1000) or DEFAULT_MAX
    if key is not None and (begin is not None or end is not None):
        raise ApiError(400, "search by key or by time range (begin, end), not both")
    admin = await dash.admin(request)
    if key is not None:
        found = await admin.find_by_key(topic, key, limit)
        return web.json_response(
            {
                "topic": topic,
                "key": key,
                "messages": [message_summary(m) for m in found.messages],
                "cut": found.cut,
                "incomplete": found.incomplete,
            }
        )
    if begin is None and end is None:
        raise ApiError(400, "give key, or begin and/or end (epoch ms or ISO-8601)")
    now = dash.clock.now_ms()
    end = now if end is None else end
    begin = end - HOUR_MS if begin is None else begin
    if begin > end:
        raise ApiError(400, "begin is after end")
    ranged = await admin.messages_between(topic, begin, end, limit)
    return web.json_response(
        {
            "topic": topic,
            "begin": begin,
            "end": end,
            "messages": [message_summary(m) for m in ranged.messages],
            "cut": ranged.cut,
        }
    )


async def one(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    msg_id = request.match_info["msg_id"]
    try:
        message = await admin.message_by_id(msg_id, text(request.query, "topic"))
    except AdminError as exc:  # the client speaks of the CLI's --topic: say ?topic= here
        raise AdminError(exc.message.replace("(--topic)", "(?topic=...)"), exc.code) from None
    return web.json_response(message_view(message))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/messages", search)
    app.router.add_get("/api/messages/{msg_id}", one)
