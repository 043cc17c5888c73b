"""/api/cluster: the brokers the name servers know, with their figures; and their history.

    GET /api/cluster            every broker: cluster, name, id, role, address,
                                version, put/get rates, disk use, uptime
    GET /api/cluster/history    put/get rates of this broker over the last hour
                                (?since=EPOCH_MS for only the newer points)

The figures are each broker's GET_BROKER_RUNTIME_INFO, as `tidemq cluster
list` shows them; a broker that does not answer is listed with its error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tidemq.client.admin import AdminClient, AdminError
from tidemq.web.context import dashboard
from tidemq.web.params import timestamp_ms

__all__ = ["add_routes"]

MASTER_ID = 0


def _number(runtime: dict[str, str], key: str, kind: type[float] | type[int]) -> float | None:
    """A figure of the runtime table as `kind` (KVTable values are all text); None if absent."""
    try:
        return kind(runtime[key])
    except (KeyError, TypeError, ValueError):
        return None


def broker_row(
    place: tuple[str, str, int, str], runtime: dict[str, str] | None, error: str | None
) -> dict[str, Any]:
    """One broker of /api/cluster: (cluster, name, id, address) and its runtime figures."""
    cluster, name, broker_id, address = place
    runtime = runtime or {}
    boot = _number(runtime, "bootTimestamp", int)
    return {
        "cluster": cluster,
        "broker": name,
        "id": broker_id,
        "role": "MASTER" if broker_id == MASTER_ID else "SLAVE",
        "address": address,
        "version": runtime.get("brokerVersionDesc"),
        "put_tps": _number(runtime, "putTps", float),
        "get_tps": _number(runtime, "getTransferedTps", float),
        "put_total": _number(runtime, "msgPutTotalTodayNow", int),
        "get_total": _number(runtime, "msgGetTotalTodayNow", int),
        "disk_ratio": _number(runtime, "commitLogDiskRatio", float),
        "disk_full": runtime.get("tidemqDiskFull") == "true",
        "topics": _number(runtime, "topicCount", int),
        "boot_timestamp": int(boot) if boot is not None else None,
        "error": error,
    }


async def _runtime(admin: AdminClient, address: str) -> tuple[dict[str, str] | None, str | None]:
    try:
        return await admin.broker_runtime_stats(address), None
    except AdminError as exc:
        return None, exc.message


async def cluster(request: web.Request) -> web.Response:
    dash = dashboard(request)
    admin = await dash.admin(request)
    info = await admin.cluster_info()
    places = [
        (cluster_name, name, broker_id, address)
        for cluster_name, names in info.clusters.items()
        for name in names
        for broker_id, address in sorted(
            (info.brokers[name].addrs if name in info.brokers else {}).items()
        )
    ]
    answers = await asyncio.gather(*(_runtime(admin, place[3]) for place in places))
    brokers = [
        broker_row(place, runtime, error)
        for place, (runtime, error) in zip(places, answers, strict=True)
    ]
    return web.json_response(
        {
            "this_broker": dash.broker_name,
            "namesrv": admin.namesrv,
            "access_control": dash.access.on,
            "clusters": {name: list(members) for name, members in info.clusters.items()},
            "brokers": brokers,
        }
    )


async def history(request: web.Request) -> web.Response:
    dash = dashboard(request)
    dash.check(request)
    since = timestamp_ms(request.query, "since")
    store = dash.sampler.history
    brokers: dict[str, dict[str, Any]] = {}
    for name in store.names("broker:"):
        _, broker, kind = name.split(":", 2)
        brokers.setdefault(broker, {})[kind] = store.series(name, since)
    return web.json_response(
        {
            "broker": dash.broker_name,
            "interval_s": dash.sampler.interval_s,
            "now": dash.clock.now_ms(),
            "brokers": brokers,
            "last_error": dash.sampler.last_error,
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/cluster", cluster)
    app.router.add_get("/api/cluster/history", history)
