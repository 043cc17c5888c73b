"""The admin clients the API calls the cluster with: one per caller's credentials.

The dashboard sees the cluster as the CLI does: through the name servers of
the broker's config, with the same AdminClient. A caller's requests are
signed with the caller's credentials (see access.py), so each set of
credentials gets its own client (its own connections); the last few are
kept, the others closed. Without access control there is one client.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from tidemq.acl.credentials import Credentials
from tidemq.client.admin import AdminClient
from tidemq.common.clock import Clock
from tidemq.transport.tls import TlsConfig

__all__ = ["AdminPool"]

KEPT_CLIENTS = 16
ADMIN_TIMEOUT_S = 5.0


class AdminPool:
    def __init__(
        self,
        namesrv: Sequence[str],
        clock: Clock,
        *,
        tls: TlsConfig | None = None,
        timeout: float = ADMIN_TIMEOUT_S,
    ) -> None:
        self._namesrv = list(namesrv)
        self._clock = clock
        self._tls = tls
        self._timeout = timeout
        self._clients: OrderedDict[str, AdminClient] = OrderedDict()

    async def get(self, credentials: Credentials | None) -> AdminClient:
        key = ""
        if credentials is not None:
            secret = hashlib.sha256(credentials.secret_key.encode()).hexdigest()
            key = f"{credentials.access_key}\0{secret}"
        client = self._clients.get(key)
        if client is None:
            client = AdminClient(
                self._namesrv,
                timeout=self._timeout,
                clock=self._clock,
                credentials=credentials,
                tls=self._tls,
            )
            self._clients[key] = client
            while len(self._clients) > KEPT_CLIENTS:
                _, old = self._clients.popitem(last=False)
                await old.close()
        self._clients.move_to_end(key)
        return client

    async def close(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.close()
