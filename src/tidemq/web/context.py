"""What the API's handlers share: the broker, the auth hook, the admin clients, the history.

One `Dashboard` per HTTP application (web.AppKey `DASHBOARD`); a handler
asks it for an admin client for its caller (`admin`), which runs the auth
hook first, or for the caller alone (`check`) before reading the broker's
own tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from tidemq.broker.assembly import BrokerCore
from tidemq.client.admin import AdminClient
from tidemq.common.clock import Clock
from tidemq.web.access import AccessHook, Caller
from tidemq.web.admin_pool import AdminPool
from tidemq.web.sampler import Sampler

__all__ = ["DASHBOARD", "Dashboard", "dashboard"]


@dataclass(frozen=True, slots=True)
class Dashboard:
    core: BrokerCore
    access: AccessHook
    admins: AdminPool
    sampler: Sampler
    clock: Clock

    @property
    def broker_name(self) -> str:
        return self.core.service.config.broker_name

    def check(self, request: web.Request, *, write: bool = False) -> Caller:
        """The caller, when the auth hook lets them do this (else ApiError 401/403)."""
        return self.access.caller(request.headers.get("Authorization"), write=write)

    async def admin(self, request: web.Request, *, write: bool = False) -> AdminClient:
        """An admin client signing as the caller, after the auth hook's check."""
        caller = self.check(request, write=write)
        return await self.admins.get(caller.credentials)


DASHBOARD: web.AppKey[Dashboard] = web.AppKey("dashboard", Dashboard)


def dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD]
