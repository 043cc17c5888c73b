"""The HTTP application of a broker: which path is served by what.

`/metrics` is the Prometheus exposition of `registry`; `/api/...` is the JSON
API the dashboard is built on (usable with curl); `/` is the dashboard.
Each part lives in its own module and adds its routes here.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from tidemq.broker.assembly import BrokerCore
from tidemq.web.metrics.merged import MergedFamilies

CORE_KEY: web.AppKey[BrokerCore] = web.AppKey("core", BrokerCore)
REGISTRY_KEY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)


def build_app(core: BrokerCore, registry: CollectorRegistry) -> web.Application:
    """The routes of one broker's HTTP endpoint."""
    app = web.Application()
    app[CORE_KEY] = core
    app[REGISTRY_KEY] = registry
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/api/health", _health)
    return app


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
