"""The HTTP application of a broker: which path is served by what.

`/metrics` is the Prometheus exposition of `registry`; `/api/...` is the JSON
API the dashboard is built on (usable with curl; docs/dashboard.md); `/` and
`/static/...` are the dashboard. Each part lives in its own module and adds
its routes here. The application owns the dashboard's history sampler and
admin clients: started when the endpoint starts, stopped when it stops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from tidemq.acl.gate import AclGate
from tidemq.broker.assembly import BrokerCore
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.web import (
    api_cluster,
    api_groups,
    api_messages,
    api_timers,
    api_topics,
    api_trace,
    static_files,
)
from tidemq.web.access import AccessHook
from tidemq.web.admin_pool import AdminPool
from tidemq.web.context import DASHBOARD, Dashboard
from tidemq.web.errors import json_errors
from tidemq.web.history import History
from tidemq.web.metrics.merged import MergedFamilies
from tidemq.web.sampler import DEFAULT_INTERVAL_S, Sampler, local_reading

CORE_KEY: web.AppKey[BrokerCore] = web.AppKey("core", BrokerCore)
REGISTRY_KEY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)


def build_app(
    core: BrokerCore,
    registry: CollectorRegistry,
    *,
    acl: AclGate | None = None,
    clock: Clock = SYSTEM_CLOCK,
    sample_interval_s: float = DEFAULT_INTERVAL_S,
) -> web.Application:
    """The routes of one broker's HTTP endpoint; `acl` is the broker's gate
    (None: access control off), which the API's auth hook checks callers against."""
    app = web.Application(middlewares=[json_errors])
    app[CORE_KEY] = core
    app[REGISTRY_KEY] = registry
    config = core.service.config
    app[DASHBOARD] = Dashboard(
        core=core,
        access=AccessHook(acl),
        admins=AdminPool(config.namesrv_addrs, clock, tls=config.namesrv_client_tls),
        sampler=Sampler(lambda: local_reading(core), History(), clock, sample_interval_s),
        clock=clock,
    )
    app.cleanup_ctx.append(_dashboard_lifetime)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/api/health", _health)
    for module in (
        api_cluster,
        api_topics,
        api_groups,
        api_messages,
        api_trace,
        api_timers,
        static_files,
    ):
        module.add_routes(app)
    return app


async def _dashboard_lifetime(app: web.Application) -> AsyncIterator[None]:
    dash = app[DASHBOARD]
    dash.sampler.start()
    yield
    await dash.sampler.stop()
    await dash.admins.close()


def build_metrics_app(registry: CollectorRegistry) -> web.Application:
    """An endpoint serving only /metrics (a name server on its own)."""
    app = web.Application()
    app[REGISTRY_KEY] = registry
    app.router.add_get("/metrics", _metrics)
    return app


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(MergedFamilies(request.app[REGISTRY_KEY]))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _health(request: web.Request) -> web.Response:
    core = request.app[CORE_KEY]
    return web.json_response({"status": "ok", "broker": core.service.config.broker_name})
