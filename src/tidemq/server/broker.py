"""The broker process: a RemotingServer over the broker's processors, one store, background tasks.

Start order:

0. with ``acl_file``, read the policy (a file that cannot be used stops the
   start); the server, and the gRPC endpoint when on (an interceptor over
   the same gate), then check every request against it before its handler
   (tidemq.acl.gate) and re-read it when it changes;
1. bind the server (port 0 picks one; requests arriving before step 3 wait
   up to STARTUP_WAIT_S, then get SYSTEM_BUSY), because the store needs the
   port: it is part of every offset message id;
2. open the store (recovery runs here, on a worker thread) with the
   advertised IPv4 address and the bound port as store host; listen on the
   HA port (`tidemq.ha`): a SLAVE starts copying its master's commitlog
   (its store refuses every other write), a SYNC_MASTER's store waits for
   a slave on each write;
3. build the broker's parts in dependency order (`tidemq.broker.assembly`:
   the shared state, the delay scheduler, timers, transactions, POP, the
   processors), load topics, groups and offsets from data_dir/config, open
   the handler table and start the features; the gRPC endpoint, when on,
   calls the same processors;
4. register with every name server (REGISTER_BROKER), then start the owned
   background tasks: registration every 30 s (and at once after a topic
   change), long-poll re-check every 5 s, offset persist every 5 s, client
   and lock expiry every 10 s, retention (and a disk use check) every
   `retention_interval_s` (10 s), the delay scheduler, the ACL file's poll;
   a SLAVE starts none of the features that write (delays, timers,
   transaction checks, POP) and copies its master's topics, groups and
   offsets every `slave_sync_interval_s` (`broker.slave_sync`). A slave
   learns its master's HA and remoting addresses from the name servers'
   answers to REGISTER_BROKER.

With ``acl_access_key``/``acl_secret_key`` its requests to the name servers
are signed (RocketMQ 5's innerClientAuthenticationCredentials).

Stop order (`stop`): answer every held pull now; stop the server (stop
accepting, let in-flight requests finish up to `grace`, close connections);
cancel the background tasks; stop replication (writes still waiting for a
slave are answered FLUSH_SLAVE_TIMEOUT); stop the delay scheduler (persists its
progress); persist offsets, topics and groups; unregister from every name
server (UNREGISTER_BROKER); close the store (flush + checkpoint). A step
that fails (a full disk refusing a progress file) is logged and the rest go on,
so the store is always closed.

On a full disk the broker keeps serving: the store refuses sends, and an
offsets file that cannot be written is written again at the next persist.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import zlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import grpc
from prometheus_client import CollectorRegistry

from tidemq.acl.auth_store import AuthStore
from tidemq.acl.gate import AclGate
from tidemq.acl.policy_file import PolicyFile
from tidemq.broker.assembly import DELAY_PROGRESS_FILE, BrokerCore, assemble
from tidemq.broker.auth_admin import AuthAdmin
from tidemq.broker.config import BrokerConfig
from tidemq.broker.handlers import HANDLED_CODES, encode_json
from tidemq.broker.long_polling import recheck_interval_s
from tidemq.broker.service import BrokerService
from tidemq.broker.slave_sync import SlaveSync
from tidemq.broker.sql_filter import sql92_message_filter
from tidemq.broker.timer_progress import MASTER_PROGRESS_FILE
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.common.rpc_stats import RpcStats
from tidemq.grpc.acl_interceptor import AclInterceptor
from tidemq.grpc.cluster_routes import GRPC_ADDRESS_KEY, ClusterRoutes
from tidemq.grpc.metrics_interceptor import MetricsInterceptor, grpc_rpc_stats
from tidemq.grpc.relayed_peers import RelayedPeers
from tidemq.grpc.server import GrpcEndpoint
from tidemq.grpc.servicer import MessagingServicer
from tidemq.ha.config import BrokerRole
from tidemq.ha.epochs import EpochEntry
from tidemq.ha.service import Replication
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    decode_header,
    encode_header,
)
from tidemq.server.access_control import open_access_control
from tidemq.server.metrics import grpc_consumers, remoting_rpc_stats
from tidemq.store.config import StoreConfig
from tidemq.store.file_store import FileMessageStore
from tidemq.store.retention_report import QueueLoss
from tidemq.transport import Connection, Handler, RemotingClient, RemotingServer, not_supported
from tidemq.transport.errors import RemotingError
from tidemq.web.app import build_app
from tidemq.web.endpoint import HttpEndpoint
from tidemq.web.metrics import BrokerCollector

__all__ = ["Broker", "ControllerHooks"]


class ControllerHooks(Protocol):
    """What a controller-mode replica adds to a broker (`tidemq.server.controlled`)."""

    replica_id: int

    def store_opened(self, store: FileMessageStore) -> None:
        """The store is open and takes no write yet (a new master's epoch starts here)."""

    async def prepare_copy(self) -> None:
        """A slave is about to connect to its master (cut back to the common point)."""

    def epoch_entries(self) -> list[EpochEntry]: ...


log = logging.getLogger(__name__)

STARTUP_WAIT_S = 5.0
EXPIRY_SCAN_INTERVAL_S = 10.0
NAMESRV_TIMEOUT_S = 3.0
ACL_POLL_TICK_S = 1.0
"""How often the ACL file's poll runs; it looks at the file every acl_poll_interval_s."""


def resolve_ipv4(host: str) -> bytes:
    """The 4-byte address records carry for `host` (ali-ons reads only IPv4)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return socket.inet_aton(socket.gethostbyname(host))
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is None:
            raise ValueError(f"advertised host {host} is IPv6; RocketMQ 4 clients need IPv4")
        address = mapped
    return address.packed


async def _step(what: str, action: Callable[[], Awaitable[object]]) -> None:
    """One shutdown step; a failure is logged and the next steps still run."""
    try:
        await action()
    except OSError as exc:  # a full disk, say: what it could not write is in the message
        log.error("broker shutdown: %s failed: %s", what, exc)
    except Exception:
        log.exception("broker shutdown: %s failed", what)


def _sync(action: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        action()

    return run


def _store_runtime_info(
    store: FileMessageStore,
    replication: Callable[[], Replication | None],
    grpc_address: Callable[[], str | None],
) -> Callable[[], dict[str, str]]:
    """The file store's part of GET_BROKER_RUNTIME_INFO: commit log bounds,
    disk use, retention counters, the replication's keys, and where the gRPC
    endpoint listens (tidemqGrpcAddress: other brokers' routes point RocketMQ 5
    clients there)."""

    def info() -> dict[str, str]:
        ha = replication()
        grpc = grpc_address()
        return {
            "commitLogMinOffset": str(store.commitlog.min_offset),
            "commitLogMaxOffset": str(store.commitlog.max_offset),
            **store.runtime_info(),
            **(ha.runtime_info() if ha is not None else {}),
            **({GRPC_ADDRESS_KEY: grpc} if grpc is not None else {}),
        }

    return info


class _Gate:
    """Handlers for the codes the broker serves, usable before the service exists."""

    def __init__(self) -> None:
        self._table: dict[int, Handler] | None = None
        self._ready = asyncio.Event()

    def open(self, table: dict[int, Handler]) -> None:
        self._table = table
        self._ready.set()

    def table(self) -> dict[int, Handler]:
        return {code: self._handler(code) for code in HANDLED_CODES}

    def _handler(self, code: int) -> Handler:
        async def handle(
            request: RemotingCommand, connection: Connection
        ) -> RemotingCommand | None:
            table = self._table
            if table is None:
                try:
                    async with asyncio.timeout(STARTUP_WAIT_S):
                        await self._ready.wait()
                except TimeoutError:
                    return RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_BUSY, "the broker is still starting"
                    )
                table = self._table or {}
            handler = table.get(code)
            if handler is None:
                return not_supported(request)
            return await handler(request, connection)

        return handle


class Broker:
    """One broker: `await broker.start()`, `broker.address`, `await broker.stop()`."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock = SYSTEM_CLOCK,
        *,
        replica: ControllerHooks | None = None,
    ) -> None:
        """`replica`: this broker is one replica of a controller-mode broker
        set, in the role `config` gives it (`tidemq.server.controlled` runs it)."""
        self.config = config
        self.clock = clock
        self.replica = replica
        self.server: RemotingServer | None = None
        self.store: FileMessageStore | None = None
        self.replication: Replication | None = None
        """The HA port, a slave's copy of its master, a SYNC_MASTER's waits (tidemq.ha)."""
        self.core: BrokerCore | None = None
        """The broker's parts (state, features, processors), once the store is open."""
        self.grpc: GrpcEndpoint | None = None
        self.http: HttpEndpoint | None = None
        self.metrics_registry = CollectorRegistry(auto_describe=True)
        """What /metrics exposes; the composition root adds the name server's collector."""
        counting = config.metrics_counting
        self.remoting_rpc: RpcStats | None = remoting_rpc_stats() if counting else None
        """RPC latencies of the remoting port (None: not measured)."""
        self.grpc_rpc: RpcStats | None = grpc_rpc_stats() if counting else None
        self.acl: AclGate | None = None
        """Access control on the remoting port (config.acl_file), None when off."""
        self.acl_file: PolicyFile | None = None
        self.auth_store: AuthStore | None = None
        """The RocketMQ 5 users and ACLs (served to admins even when access control is off)."""
        credentials = config.inner_credentials
        self._namesrv = RemotingClient(
            name=f"broker-{config.broker_name}-namesrv",
            sign=credentials.sign if credentials is not None else None,
            tls=config.namesrv_client_tls,
        )
        self._master: RemotingClient | None = None
        """A slave's client to its master (metadata copies), signed as the name server's."""
        self.slave_sync: SlaveSync | None = None
        self._credentials = credentials
        self._tasks: set[asyncio.Task[None]] = set()
        self._register_now: asyncio.Event | None = None
        self._offset_write: asyncio.Future[None] | None = None
        self._store_host = resolve_ipv4(config.advertised_host)
        self._offsets_unwritten = False
        self._started = False
        self._stopped = False

    # -- properties ----------------------------------------------------------------

    @property
    def service(self) -> BrokerService:
        """The broker's shared state (tables, offsets, clients, long polling)."""
        if self.core is None:
            raise RuntimeError("the broker is not started")
        return self.core.service

    @property
    def port(self) -> int:
        if self.server is None:
            raise RuntimeError("the broker is not started")
        return self.server.port

    @property
    def grpc_address(self) -> str | None:
        """ "host:port" of the gRPC endpoint, None when it is off."""
        if self.grpc is None:
            return None
        return f"{self.config.advertised_host}:{self.grpc.port}"

    @property
    def http_address(self) -> str | None:
        """ "host:port" of the HTTP endpoint (/metrics, dashboard), None when it is off."""
        if self.http is None:
            return None
        return f"{self.config.advertised_host}:{self.http.port}"

    @property
    def address(self) -> str:
        """ "host:port" clients dial (brokerAddrs in routes, part of every msgId)."""
        return f"{self.config.advertised_host}:{self.port}"

    @property
    def ha_address(self) -> str | None:
        """ "host:port" of the HA port slaves copy the commitlog from."""
        if self.replication is None:
            return None
        return f"{self.config.advertised_host}:{self.replication.port}"

    @property
    def is_slave(self) -> bool:
        return self.config.broker_role is BrokerRole.SLAVE

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            raise RuntimeError("the broker was already started")
        self._started = True
        config = self.config
        config.config_dir.mkdir(parents=True, exist_ok=True)
        self._start_acl()
        gate = _Gate()
        self.server = RemotingServer(
            f"broker-{config.broker_name}",
            gate.table(),
            host=config.listen_host,
            port=config.listen_port,
            max_in_flight=config.max_in_flight_per_connection,
            on_close=self._connection_closed,
            max_idle_s=config.connection_max_idle_s,
            frame_budget_bytes=config.frame_buffer_budget_bytes,
            frame_timeout_s=config.frame_timeout_s,
            gate=self._acl_check if self.acl is not None else None,
            tls=config.remoting_tls,
            rpc_stats=self.remoting_rpc,
        )
        await self.server.start()
        try:
            await self._open(gate)
        except BaseException:
            await self.server.stop(0.5)
            if self.replication is not None:
                await self.replication.stop()
            if self.store is not None:
                await asyncio.to_thread(self.store.close)
            raise
        servicer = None
        if config.grpc_port is not None and self.core is not None:
            peers = RelayedPeers()  # the real clients behind the TLS front, if there is one
            routes = None
            if config.grpc_cluster_routes and config.namesrv_addrs:
                routes = ClusterRoutes(
                    config.namesrv_addrs, self._namesrv, lambda: self.address, self.clock
                )
            servicer = MessagingServicer.of(self.core, peers.real, routes)
            self.grpc = GrpcEndpoint(
                servicer,
                config.listen_host,
                config.grpc_port,
                tls=config.grpc_tls,
                peers=peers,
                max_idle_s=config.connection_max_idle_s,
                max_connections=config.grpc_max_connections,
                handshake_timeout_s=config.frame_timeout_s,
                interceptors=self._grpc_interceptors(peers),
            )
            try:
                await self.grpc.start()
            except BaseException:
                self._stopped = False
                await self.stop(0.5)
                raise
        if config.http_port is not None and self.core is not None and self.store is not None:
            self.metrics_registry.register(
                BrokerCollector(
                    self.core,
                    self.store,
                    self.clock,
                    rpc=[rpc for rpc in (self.remoting_rpc, self.grpc_rpc) if rpc is not None],
                    other_consumers=grpc_consumers(servicer) if servicer is not None else None,
                    renewals=servicer.renewals if servicer is not None else None,
                    unit_suffix=config.metrics_unit_suffix,
                )
            )
            self.http = HttpEndpoint(
                build_app(self.core, self.metrics_registry, acl=self.acl, clock=self.clock),
                config.listen_host,
                config.http_port,
            )
            try:
                await self.http.start()
            except BaseException:
                self._stopped = False
                await self.stop(0.5)
                raise
        await self.register_all()
        self._spawn(self._register_loop(), "register")
        recheck_every_s = recheck_interval_s(
            long_polling_enable=config.long_polling_enable,
            long_polling_check_interval_s=config.long_polling_check_interval_s,
            short_polling_time_ms=config.short_polling_time_ms,
        )
        self._spawn(self._every(recheck_every_s, self._recheck), "long-poll-recheck")
        self._spawn(self._every(config.persist_interval_s, self._persist_offsets), "persist")
        self._spawn(self._every(EXPIRY_SCAN_INTERVAL_S, self._expire_clients), "client-expiry")
        self._spawn(self._every(config.retention_interval_s, self._retention), "retention")
        if self.slave_sync is not None:
            self._spawn(self.slave_sync.run(), "slave-sync")
        if self.acl_file is not None:
            self._spawn(self._every(ACL_POLL_TICK_S, self._poll_acl), "acl-reload")
        log.info("broker %s started at %s", config.broker_name, self.address)

    def _start_acl(self) -> None:
        """Read the ACL file and the 5.x users (AclConfigError / AuthModelError if
        unusable: no start with a policy that cannot be read) and build the gate
        the server checks requests with (tidemq.server.access_control)."""
        access = open_access_control(self.config, self.clock)
        self.auth_store = access.store
        self.acl, self.acl_file = access.gate, access.policy_file

    def _grpc_interceptors(self, peers: RelayedPeers) -> list[grpc.aio.ServerInterceptor]:
        """Timing first (refusals are answers too, as on the remoting port), then
        the remoting port's gate: one policy, one reload; both see the real
        client behind the TLS front (`peers`)."""
        interceptors: list[grpc.aio.ServerInterceptor] = []
        if self.grpc_rpc is not None:
            interceptors.append(MetricsInterceptor(self.grpc_rpc))
        if self.acl is not None:
            skew = self.config.acl_grpc_clock_skew_s
            interceptors.append(AclInterceptor(self.acl, self.clock, skew, real_peer=peers.real))
        return interceptors

    def _acl_check(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        acl = self.acl
        return None if acl is None else acl.check(request, connection.remote[0])

    async def _poll_acl(self) -> None:
        if self.acl_file is not None:
            self.acl_file.poll()

    async def _open(self, gate: _Gate) -> None:
        config = self.config
        port = self.port
        file_size = (
            config.commitlog_file_size or StoreConfig(root=config.store_dir).commitlog_file_size
        )
        store_config = StoreConfig(
            root=config.store_dir,
            commitlog_file_size=file_size,
            flush_mode=config.flush_mode,
            store_host=self._store_host,
            store_port=port,
            delay_levels=config.delay_levels,
            max_message_size=min(MAX_MESSAGE_SIZE, file_size - 64 * 1024),
            file_reserved_hours=config.file_reserved_hours,
            delete_when=config.delete_when,
            disk_max_used_ratio=config.disk_max_used_ratio,
            disk_force_clean_ratio=config.disk_force_clean_ratio,
            disk_warning_ratio=config.disk_warning_ratio,
            clean_file_forcibly=config.clean_file_forcibly,
            replica=self.is_slave,
        )
        self.store = FileMessageStore(store_config, clock=self.clock)
        await asyncio.to_thread(self.store.open)
        if self.replica is not None:
            self.replica.store_opened(self.store)
        await self._start_replication(self.store)
        core = assemble(
            config.with_port(port),
            self.store,
            store_host=self._store_host,
            store_port=port,
            clock=self.clock,
            max_message_size=store_config.max_message_size,
            sql_filter_factory=sql92_message_filter if config.enable_property_filter else None,
            on_topics_change=self._request_registration,
            store_info=_store_runtime_info(
                self.store, lambda: self.replication, lambda: self.grpc_address
            ),
        )
        core.service.load()
        core.service.attach_loop(asyncio.get_running_loop())
        self.core = core
        if self.is_slave:
            credentials = self._credentials
            self._master = RemotingClient(
                name=f"broker-{config.broker_name}-master",
                sign=credentials.sign if credentials is not None else None,
                tls=config.master_client_tls,
            )
            service = core.service
            self.slave_sync = SlaveSync(
                self._master,
                topics=service.topics,
                groups=service.groups,
                offsets=service.offsets,
                delay_progress=config.config_dir / DELAY_PROGRESS_FILE,
                timer_progress=config.config_dir / MASTER_PROGRESS_FILE,
                own_address=lambda: self.address,
                interval_s=config.slave_sync_interval_s,
            )
        self._register_now = asyncio.Event()
        table = core.dispatch_table()
        if self.replica is not None:
            table[RequestCode.GET_BROKER_EPOCH_CACHE] = self._epoch_cache
        if self.auth_store is not None:
            is_super = self.acl.is_super if self.acl is not None else None
            table.update(AuthAdmin(self.auth_store, is_super).handlers())
        gate.open(table)  # requests that arrived while the store opened
        assert self.server is not None
        self.server.use_handlers(table)  # later ones skip the gate
        if self.is_slave:
            # A slave writes nothing of its own: delays, timers, transaction
            # checks and POP revives run on its master, whose writes it copies.
            return
        if core.scheduler is not None:
            await core.scheduler.start()
        if core.timers is not None:
            await core.timers.start()
        if core.transactions is not None:
            await core.transactions.start()
        if core.pop_engine is not None:
            await core.pop_engine.start()

    async def stop(self, grace: float = 5.0) -> None:
        """Shut down in the documented order; safe to call twice."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        core = self.core
        service = core.service if core is not None else None
        if service is not None:
            service.long_polling.wake_all()
        if self.http is not None:
            await self.http.stop()
        if self.grpc is not None:
            await self.grpc.stop(min(grace, 2.0))
        if self.server is not None:
            await self.server.stop(grace)
        tasks, self._tasks = set(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.replication is not None:
            await _step("stopping replication", self.replication.stop)
        if core is not None and not self.is_slave:
            # A slave started none of these (`start`); stopping one would write
            # its progress as read at start-up over the copy of its master's
            # that the slave keeps (the delay offsets, the transaction checks').
            if core.scheduler is not None:
                await _step("stopping the delay scheduler", core.scheduler.stop)
            if core.pop_engine is not None:
                await _step("stopping POP", core.pop_engine.stop)
            if core.transactions is not None:
                await _step("stopping the transaction checks", core.transactions.stop)
            if core.timers is not None:
                await _step("stopping the timers", core.timers.stop)
        if service is not None:
            await self._finish_offset_write()
            await _step(
                "persisting consumer offsets",
                lambda: asyncio.to_thread(service.offsets.persist),
            )
            await _step("persisting topics", _sync(service.topics.persist))
            await _step("persisting groups", _sync(service.groups.persist))
        await self._unregister_all()
        await self._namesrv.close()
        if self._master is not None:
            await self._master.close()
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
        log.info("broker %s stopped", self.config.broker_name)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- name servers ------------------------------------------------------------------

    def _request_registration(self) -> None:
        if self._register_now is not None:
            self._register_now.set()

    def _registration(self) -> RemotingCommand:
        service = self.service
        wrapper = service.topics.serialize()
        for config in wrapper["topicConfigTable"].values():  # brokerPermission masks each
            config["perm"] = service.permission.mask(config["perm"])
        body = encode_json({"topicConfigSerializeWrapper": wrapper, "filterServerList": []})
        header = RegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.address,
            cluster_name=self.config.cluster_name,
            ha_server_addr=self.ha_address or self.address,
            broker_id=self.config.broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, encode_header(header), body)

    async def register_all(self) -> int:
        """REGISTER_BROKER to every name server; how many accepted it. A slave
        learns its master's addresses from the answers (RegisterBrokerResult)."""
        command = self._registration()
        responses = await asyncio.gather(
            *(self._call_namesrv(addr, command) for addr in self.config.namesrv_addrs)
        )
        accepted = [response for response in responses if response is not None]
        if self.is_slave:
            self._learn_master(accepted)
        return len(accepted)

    def _learn_master(self, answers: list[RemotingCommand]) -> None:
        for response in answers:
            try:
                result = decode_header(RegisterBrokerResponseHeader, response.ext_fields)
            except ProtocolError as exc:
                log.warning("unreadable REGISTER_BROKER answer: %s", exc)
                continue
            if self.slave_sync is not None:
                self.slave_sync.learn_master(result.master_addr)
            if result.ha_server_addr and self.replication is not None:
                self.replication.learn_master(result.ha_server_addr)
                return

    async def _unregister_all(self) -> None:
        if self.server is None or not self.config.namesrv_addrs:
            return
        header = UnregisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.address,
            cluster_name=self.config.cluster_name,
            broker_id=self.config.broker_id,
        )
        command = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, encode_header(header))
        await asyncio.gather(
            *(self._call_namesrv(addr, command, 1.0) for addr in self.config.namesrv_addrs)
        )

    async def _call_namesrv(
        self, address: str, command: RemotingCommand, timeout: float = NAMESRV_TIMEOUT_S
    ) -> RemotingCommand | None:
        """The name server's answer when it accepted `command`, else None (logged)."""
        try:
            response = await self._namesrv.invoke(address, command, timeout)
        except (RemotingError, ValueError) as exc:
            log.warning("name server %s: %s failed: %s", address, command.code, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("name server %s refused %s: %s", address, command.code, response.remark)
            return None
        return response

    async def _register_loop(self) -> None:
        event = self._register_now
        if event is None:
            raise RuntimeError("registration loop started before the broker")
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.register_interval_s):
                    await event.wait()
            event.clear()
            try:
                await self.register_all()
            except Exception:
                log.exception("registration with the name servers failed")

    # -- replication ----------------------------------------------------------------------

    async def _epoch_cache(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (AdminBrokerProcessor.getBrokerEpochCache): the
        epoch entries of this replica's commitlog and its end, as Java's
        EpochEntryCache; a slave about to copy from this master asks for them."""
        replica, store = self.replica, self.store
        if replica is None or store is None:
            return not_supported(request)
        end = store.commitlog.max_offset
        entries = replica.epoch_entries()
        body = encode_json(
            {
                "clusterName": self.config.cluster_name,
                "brokerName": self.config.broker_name,
                "brokerId": replica.replica_id,
                "epochList": [
                    {
                        "epoch": e.epoch,
                        "startOffset": e.start,
                        "endOffset": entries[i + 1].start if i + 1 < len(entries) else end,
                    }
                    for i, e in enumerate(entries)
                ],
                "maxOffset": end,
            }
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def _start_replication(self, store: FileMessageStore) -> None:
        """Listen on the HA port (every role, as RocketMQ's HAService); a slave
        starts copying, a SYNC_MASTER's store starts waiting for slaves. The
        default port (listen port + 1) falls back to a free one when taken:
        slaves learn the real one from the name server."""
        config = self.config
        replica = self.replica
        replication = Replication(
            store,
            config.broker_role,
            config.ha_settings,
            master_address=config.ha_master_address,
            replica_id=replica.replica_id if replica is not None else None,
            prepare=replica.prepare_copy if replica is not None else None,
        )
        port = config.ha_port(self.port)
        try:
            await replication.start(config.listen_host, port)
        except OSError as exc:
            if config.ha_listen_port is not None or port == 0:
                raise OSError(
                    exc.errno, f"cannot listen on HA port {port}: {exc.strerror}"
                ) from exc
            log.warning("HA port %d is taken (%s): listening on a free port instead", port, exc)
            await replication.start(config.listen_host, 0)
        self.replication = replication
        log.info(
            "%s %s (id %d): HA port %s",
            config.broker_role.value,
            config.broker_name,
            config.broker_id,
            self.ha_address,
        )

    # -- background work ------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"broker-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _every(interval_s: float, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await work()
            except Exception:
                log.exception("broker background task failed")

    async def _recheck(self) -> None:
        self.service.recheck_long_polls()

    async def _persist_offsets(self) -> None:
        self._persist_unsaved_tables()
        offsets = self.service.offsets
        if not offsets.dirty:
            return
        document = offsets.snapshot()
        write = asyncio.ensure_future(asyncio.to_thread(offsets.write, document))
        self._offset_write = write
        try:
            await asyncio.shield(write)
        except OSError as exc:
            offsets.mark_dirty()  # written whole again at the next persist
            if not self._offsets_unwritten:
                self._offsets_unwritten = True
                log.warning(
                    "cannot write consumer offsets (%s); they stay in memory and are "
                    "written again every %.0f s",
                    exc,
                    self.config.persist_interval_s,
                )
            return
        if self._offsets_unwritten:
            self._offsets_unwritten = False
            log.info("consumer offsets written again")

    def _persist_unsaved_tables(self) -> None:
        """Topics and groups whose change a full disk kept from the file."""
        service = self.service
        for table in (service.topics, service.groups):
            if table.unsaved:
                with contextlib.suppress(OSError):  # still full: warned once already
                    table.persist()
                    log.info("%s written again", table.path.name)

    async def _finish_offset_write(self) -> None:
        write, self._offset_write = self._offset_write, None
        if write is not None and not write.done():
            with contextlib.suppress(Exception):
                await write

    async def _expire_clients(self) -> None:
        self.service.scan_expired_clients()
        self.service.locks.purge_expired()

    async def _retention(self) -> None:
        store = self.store
        if store is None:
            return
        forced_before = store.retention.forced_files
        store.run_retention()
        if store.retention.forced_files > forced_before:
            self._report_unread_losses(store.retention.last_forced)

    def _report_unread_losses(self, losses: list[QueueLoss]) -> None:
        """Name the consumer groups that had not consumed what a forced
        deletion took (their committed offset was below the new minimum)."""
        offsets = self.service.offsets
        for loss in losses:
            behind = sorted(
                group
                for group in offsets.groups_of_topic(loss.topic)
                if offsets.query(group, loss.topic, loss.queue_id) < loss.end
            )
            if behind:
                log.warning(
                    "forced deletion of %s: consumer groups %s had not consumed all of it",
                    loss.describe(),
                    ", ".join(behind),
                )

    def _connection_closed(self, connection: Connection) -> None:
        if self.core is not None:
            self.core.service.connection_closed(connection)
