"""/api/timers and /api/transactions: what this broker holds back, and why.

    GET  /api/timers[?bins=24&limit=100]   parked timer messages: how many, a
                                           histogram of their due times, the
                                           earliest with their recall handles
    POST /api/timers/recall                {"topic", "handle"}: cancel one
                                           (RECALL_MESSAGE, as `tidemq recall`)
    GET  /api/transactions                 half messages waiting for their
                                           producer's commit or rollback

Listings read this broker's own timer files and half queue (each broker
holds its own); a recall goes through the admin client, signed as the
caller, to whichever broker the handle names.
"""

from __future__ import annotations

from aiohttp import web

from tidemq.broker.parked_timers import parked_timers
from tidemq.broker.waiting_halves import waiting_halves
from tidemq.web.context import dashboard
from tidemq.web.history import histogram
from tidemq.web.params import json_body, optional_int, required

__all__ = ["add_routes", "due_histogram"]

DEFAULT_BINS = 24


def due_histogram(due_ms: list[int], now_ms: int, bins: int) -> list[tuple[int, int]]:
    """Due times in `bins` equal spans from now (or the earliest overdue one)
    to just past the latest."""
    if not due_ms:
        return []
    start = min(now_ms, due_ms[0])
    end = max(due_ms[-1] + 1, start + bins)
    return histogram(due_ms, start, end, bins)


async def timers(request: web.Request) -> web.Response:
    dash = dashboard(request)
    dash.check(request)
    bins = optional_int(request.query, "bins", low=1, high=200) or DEFAULT_BINS
    limit = optional_int(request.query, "limit", low=0, high=1000)
    engine = dash.core.timers
    if engine is None:
        return web.json_response({"enabled": False, "total": 0, "histogram": [], "timers": []})
    listing = parked_timers(engine, 100 if limit is None else limit)
    now = dash.clock.now_ms()
    return web.json_response(
        {
            "enabled": engine.config.timer_enable,
            "broker": dash.broker_name,
            "now": now,
            "total": len(listing.due_ms),
            "not_enqueued": listing.not_enqueued,
            "cut": listing.cut,
            "histogram": due_histogram(listing.due_ms, now, bins),
            "timers": [
                {
                    "topic": t.topic,
                    "msg_id": t.msg_id,
                    "deliver_ms": t.deliver_ms,
                    "parked_ms": t.parked_ms,
                    "body_size": t.body_size,
                    "recall_handle": t.recall_handle,
                }
                for t in listing.first
            ],
        }
    )


async def recall(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request, write=True)
    body = await json_body(request)
    topic = required(body, "topic")
    handle = required(body, "handle")
    msg_id = await admin.recall(topic, handle)
    return web.json_response({"topic": topic, "msg_id": msg_id, "recalled": True})


async def transactions(request: web.Request) -> web.Response:
    dash = dashboard(request)
    dash.check(request)
    engine = dash.core.transactions
    if engine is None:
        return web.json_response({"enabled": False, "waiting": [], "cut": False})
    rows, cut = waiting_halves(engine)
    config = engine.config
    return web.json_response(
        {
            "enabled": True,
            "broker": dash.broker_name,
            "check_interval_ms": config.transaction_check_interval_ms,
            "timeout_ms": config.transaction_timeout_ms,
            "check_max": config.transaction_check_max,
            "waiting": [
                {
                    "transaction_id": h.transaction_id,
                    "producer_group": h.producer_group,
                    "topic": h.topic,
                    "born_timestamp": h.born_ms,
                    "stored_timestamp": h.stored_ms,
                    "check_times": h.check_times,
                    "body_size": h.body_size,
                }
                for h in rows
            ],
            "cut": cut,
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/timers", timers)
    app.router.add_post("/api/timers/recall", recall)
    app.router.add_get("/api/transactions", transactions)
