"""The name server process: a RemotingServer over the route table, plus the expiry scan.

With ``acl_file`` the requests that change routes need a signed admin account
(access.py; RocketMQ checks nothing here) and the file is re-read when it changes.

Every ``scan_interval_s`` (10 s, as Java) brokers that have not registered
for 120 s are removed and their connections closed. A broker whose
registering connection closes is removed at once. Stopping cancels the scan
and then stops the server (see transport/server.py for the order).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from tidemq.acl.credentials import Credentials
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.rpc_stats import RpcStats
from tidemq.transport import Connection, Handler, RemotingServer, ServerTls

from .access import NamesrvAccess
from .handlers import NamesrvHandlers
from .routes import BROKER_EXPIRY_MS, BrokerRecord, RouteTable

__all__ = ["DEFAULT_PORT", "NameServer"]

logger = logging.getLogger("tidemq.namesrv")

DEFAULT_PORT = 9876
SCAN_INTERVAL_S = 10.0
ACL_POLL_TICK_S = 1.0


class NameServer:
    """A name server listening on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        clock: Clock = SYSTEM_CLOCK,
        *,
        scan_interval_s: float = SCAN_INTERVAL_S,
        expiry_ms: int = BROKER_EXPIRY_MS,
        max_in_flight: int = 1024,
        acl_file: str | Path | None = None,
        acl_poll_interval_s: float = 5.0,
        trusted: Sequence[Credentials] = (),
        tls: ServerTls | None = None,
        rpc_stats: RpcStats | None = None,
        extra_handlers: Mapping[int, Handler] | None = None,
    ) -> None:
        """`acl_file`: a plain_acl.yml guarding the route-changing requests
        (AclConfigError if unusable); `trusted`: admin credentials no file names;
        `tls`: the port's TLS mode, as a broker's (TlsConfigError if unusable);
        `rpc_stats`: where request latencies are counted (None: not measured);
        `extra_handlers`: more request codes served on the same port (the
        embedded controller's, RocketMQ's enableControllerInNamesrv)."""
        self.routes = RouteTable(clock, expiry_ms=expiry_ms)
        self._scan_interval_s = scan_interval_s
        self.access: NamesrvAccess | None = None
        if acl_file is not None:
            self.access = NamesrvAccess(
                acl_file, clock, interval_s=acl_poll_interval_s, trusted=trusted
            )
        self._server = RemotingServer(
            "namesrv",
            {**NamesrvHandlers(self.routes).table(), **(extra_handlers or {})},
            host=host,
            port=port,
            max_in_flight=max_in_flight,
            on_close=self._connection_closed,
            gate=self.access.check if self.access is not None else None,
            tls=tls,
            rpc_stats=rpc_stats,
        )
        self.expired_brokers = 0
        """Brokers removed for not registering in time, since start."""
        self._scan_task: asyncio.Task[None] | None = None
        self._acl_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        """``"host:port"`` as brokers and clients should dial it."""
        return f"{self._server.host}:{self._server.port}"

    @property
    def server(self) -> RemotingServer:
        return self._server

    async def start(self) -> None:
        await self._server.start()
        loop = asyncio.get_running_loop()
        self._scan_task = loop.create_task(self._scan_loop())
        if self.access is not None:
            self._acl_task = loop.create_task(self._acl_loop(self.access))
        logger.info("name server listening on %s", self.address)

    async def stop(self, grace: float = 5.0) -> None:
        tasks = [t for t in (self._scan_task, self._acl_task) if t is not None]
        self._scan_task = self._acl_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.stop(grace)

    async def __aenter__(self) -> NameServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def scan_now(self) -> list[BrokerRecord]:
        """One expiry pass: remove silent brokers and close their connections."""
        expired = self.routes.expire()
        self.expired_brokers += len(expired)
        for record in expired:
            logger.warning(
                "broker expired after %d ms without registering: %s %s id %d at %s",
                self.routes.expiry_ms,
                record.cluster,
                record.broker_name,
                record.broker_id,
                record.broker_addr,
            )
            if isinstance(record.channel, Connection):
                record.channel.close()
        return expired

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self._scan_interval_s)
            try:
                self.scan_now()
            except Exception:
                logger.exception("broker expiry scan failed")

    async def _acl_loop(self, access: NamesrvAccess) -> None:
        while True:
            await asyncio.sleep(ACL_POLL_TICK_S)
            try:
                access.file.poll()
            except Exception:
                logger.exception("ACL file poll failed")

    def _connection_closed(self, connection: Connection) -> None:
        for record in self.routes.remove_channel(connection):
            logger.info(
                "broker removed, its connection closed: %s %s id %d at %s",
                record.cluster,
                record.broker_name,
                record.broker_id,
                record.broker_addr,
            )
