"""Broker settings, with RocketMQ's defaults where RocketMQ has one."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemq.acl.credentials import Credentials
from tidemq.broker import tls_settings
from tidemq.broker.permission import parse_permission
from tidemq.broker.slave_read import DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO, in_memory_limit
from tidemq.common.names import validate_topic_name
from tidemq.controller.config import parse_addresses
from tidemq.ha.config import BrokerRole, HaSettings
from tidemq.store.config import DEFAULT_DELAY_LEVELS, FlushMode
from tidemq.transport.tls import ServerTls, TlsConfig

MAX_TIMER_HORIZON_S = 365 * 86400
MAX_INVISIBLE_TIME_MS = 12 * 3600 * 1000
"""The longest invisible time a receive or change may set (the proxy's maxInvisibleTimeMills)."""


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    """Store in data_dir/store, topics/groups/offsets in data_dir/config."""
    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    """0 for the master, 1 and up for its slaves (RocketMQ's brokerId)."""
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    """ASYNC_MASTER, SYNC_MASTER or SLAVE (RocketMQ's brokerRole; see docs/replication.md)."""
    listen_host: str = "127.0.0.1"
    listen_port: int = 10911
    """0 picks a free port (tests)."""
    advertised_host: str = "127.0.0.1"
    """The host clients are told to connect to (brokerAddrs in routes)."""
    namesrv_addrs: tuple[str, ...] = ("127.0.0.1:9876",)
    auto_create_topic: bool = True
    """On in standalone mode, off in cluster mode."""
    default_topic_queue_nums: int = 4
    auto_create_subscription_group: bool = True
    trace_topic_enable: bool = False
    """Create the message-trace topic `msg_trace_topic_name` at start (1 queue, a
    system topic), as RocketMQ's BrokerConfig.traceTopicEnable; off, the topic
    is created by the first trace sent, when topics are auto-created."""
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    """BrokerConfig.msgTraceTopicName: the topic `trace_topic_enable` creates."""
    region_id: str = "DefaultRegion"
    """The region stamped on every message stored from a send (its MSG_REGION
    property) and named in send answers: clients trace in it (Java's
    BrokerConfig.regionId, default MixAll.DEFAULT_TRACE_REGION_ID)."""
    trace_on: bool = True
    """Stamped as TRACE_ON on every message stored from a send and named in
    send answers; false asks clients not to trace those sends and
    consumptions (Java's BrokerConfig.traceOn)."""
    flush_mode: FlushMode = FlushMode.ASYNC
    register_interval_s: float = 30.0
    client_expiry_s: float = 120.0
    long_polling_enable: bool = True
    """Hold a pull that finds nothing for the client's suspend time (15 s) and
    answer it as soon as a message arrives (Java's longPollingEnable). Off, it
    is held `short_polling_time_ms` and answered then, or at a re-check."""
    short_polling_time_ms: int = 1000
    """How long a pull is held with long polling off (shortPollingTimeMills)."""
    long_polling_check_interval_s: float = 5.0
    persist_interval_s: float = 5.0
    queue_lock_expiry_s: float = 60.0
    max_reconsume_times: int = 16
    enable_property_filter: bool = True
    """SQL92 subscriptions (Java's enablePropertyFilter, off there by default)."""
    delay_levels: str = DEFAULT_DELAY_LEVELS
    timer_enable: bool = True
    """Timer messages (any delivery time); off, they are refused as in Java."""
    timer_precision_ms: int = 100
    """Timer wheel slot width: 10..1000 ms (Java's timerPrecisionMs)."""
    timer_max_delay_s: int = 30 * 86400
    """Timer horizon: at most 365 days ahead (Java's timerMaxDelaySec)."""
    transaction_timeout_ms: int = 6000
    """A half message younger than this is not checked back (transactionTimeOut)."""
    transaction_check_interval_ms: int = 30000
    """How often unresolved half messages are checked back (transactionCheckInterval)."""
    transaction_check_max: int = 15
    """Check-backs before a half message is discarded (transactionCheckMax)."""
    grpc_port: int | None = None
    """The apache.rocketmq.v2 gRPC endpoint's port; None: no endpoint, 0: any free port."""
    http_port: int | None = None
    """The HTTP endpoint (/metrics, the JSON API, the dashboard); None: none, 0: any free port."""
    metrics_enable: bool = True
    """With an HTTP endpoint: count what /metrics shows beyond the put and get
    rates (RPC latencies, message types and sizes, pull offsets, POP, dead
    letters, transactions). Off, /metrics still shows what is read when it is
    scraped (lag, storage, topics, connections); nothing is counted for it."""
    metrics_unit_suffix: bool = True
    """Name metrics with a unit as RocketMQ 5.1.4+ serves them (its OpenTelemetry
    Prometheus exporter appends the unit: rocketmq_rpc_latency_milliseconds);
    off, the bare names of RocketMQ 5.1.0-5.1.3 and its documentation."""
    metrics_label: str = ""
    """Labels added to every metric, "key:value,key:value" (RocketMQ's metricsLabel)."""
    grpc_tls_cert: str | None = None
    """PEM certificate for the gRPC endpoint (instead of `tls_cert`); with
    `grpc_tls_key` and no `grpc_tls_mode`, it speaks TLS only."""
    grpc_tls_key: str | None = None
    grpc_tls_mode: str | None = None
    """The gRPC endpoint's own TLS mode: disabled, permissive or enforcing;
    None: the remoting port's when `tls_mode` is set, else enforcing with a
    certificate (broker/tls_settings.py)."""
    grpc_max_connections: int = 10_000
    """Connections the gRPC endpoint's TLS front relays at once (permissive
    mode, optional client certificates: tidemq.grpc.tls_front)."""
    tls_mode: str | None = None
    """The remoting port's TLS: disabled, permissive or enforcing
    (RocketMQ's tls.server.mode); None: permissive with a certificate, else
    disabled."""
    tls_cert: str | None = None
    """PEM certificate of the remoting port (tls.server.certPath)."""
    tls_key: str | None = None
    """PEM private key for `tls_cert` (tls.server.keyPath)."""
    tls_ca: str | None = None
    """PEM CA certificates client certificates must chain to (tls.server.trustCertPath)."""
    tls_verify_client: str = "none"
    """none, optional or require (tls.server.need.client.auth)."""
    namesrv_tls: bool = False
    """Connect to the name servers (and the controllers in them) over TLS, for name
    servers that enforce it."""
    namesrv_tls_ca: str | None = None
    """PEM CA the name servers' certificates must chain to; None: the system's."""
    namesrv_tls_cert: str | None = None
    """A client certificate for name servers that verify clients, with `namesrv_tls_key`."""
    namesrv_tls_key: str | None = None
    namesrv_tls_check_hostname: bool = True
    """The name servers' certificates must name the host dialled."""
    master_tls: bool | None = None
    """Connect to the master over TLS (a slave's metadata copies, a controller-mode
    replica's epoch check), with the namesrv_tls_* CA, certificate and host check;
    None: as `namesrv_tls` (RocketMQ's broker dials both with its one BrokerOuterAPI
    client and tls.client.*)."""
    broker_permission: int = 6
    """What the whole broker allows, as PermName bits (4 read, 2 write; RocketMQ's
    brokerPermission): every topic registers masked by it; without the read bit
    pulls and pops are refused. UPDATE_BROKER_CONFIG changes it while running
    (`tidemq cluster broker-config --set brokerPermission=4`)."""
    grpc_cluster_routes: bool = True
    """Answer a gRPC client's QueryRoute and QueryAssignment with every broker of the
    topic, each at its own gRPC endpoint (from the name servers' route, as RocketMQ's
    local-mode proxy does); false: this broker's queues only."""
    grpc_auto_renew: bool = True
    """Renew the invisible time of messages a gRPC push consumer received with
    auto_renew while it holds them (the proxy's enableProxyAutoRenew)."""
    grpc_default_invisible_ms: int = 60_000
    """An auto-renew receive's invisible time (the proxy's defaultInvisibleTimeMills)."""
    grpc_renew_ahead_ms: int = 10_000
    """Renew a held message whose invisible time ends within this (renewAheadTimeMillis)."""
    grpc_renew_period_ms: int = 5_000
    """How often held messages are looked at (renewSchedulePeriodMillis)."""
    grpc_renew_max_ms: int = 3 * 3_600_000
    """Stop renewing a message held this long: it goes back with its retry delay
    (renewMaxTimeMillis)."""
    min_invisible_time_mills_for_recv: int = 10_000
    """The shortest invisible time a gRPC receive may ask for, in ms, 0..12 h
    (the proxy's minInvisibleTimeMillsForRecv); auto-renew receives are exempt."""
    max_in_flight_per_connection: int = 1024
    connection_max_idle_s: float = 120.0
    """Close a connection with no traffic either way for this long; 0: never
    (Java's serverChannelMaxIdleTimeSeconds)."""
    frame_buffer_budget_bytes: int = 256 * 1024 * 1024
    """Memory all connections together may hold for frames still arriving."""
    frame_timeout_s: float = 30.0
    """A frame must arrive within this from its first byte (or wait no longer for budget)."""
    commitlog_file_size: int | None = None
    """None keeps the store default (1 GiB); tests use smaller files."""
    file_reserved_hours: float = 72.0
    """Retention: commitlog files older than this may be deleted (fileReservedTime)."""
    delete_when: str = "04"
    """Retention: the hours ("04;05") when expired files are deleted (deleteWhen)."""
    disk_max_used_ratio: float = 0.75
    """Retention: above this disk use, expired files go at any hour (diskMaxUsedSpaceRatio)."""
    disk_force_clean_ratio: float = 0.85
    """Retention: above this, the oldest files go unexpired and unread
    (diskSpaceCleanForciblyRatio); a full disk takes writes again at or below it."""
    disk_warning_ratio: float = 0.90
    """Above this disk use, sends are refused with SERVICE_NOT_AVAILABLE
    (diskSpaceWarningLevelRatio)."""
    clean_file_forcibly: bool = True
    """Retention: delete unexpired files above the force ratio (cleanFileForciblyEnable)."""
    retention_interval_s: float = 10.0
    """How often retention runs and disk use is measured (cleanResourceInterval)."""
    acl_file: str | None = None
    """A RocketMQ ``plain_acl.yml``: every remoting request is checked against
    it (ACL 1.0), and it is reloaded when it changes; None: no access control."""
    acl_poll_interval_s: float = 5.0
    """How often the ACL file is looked at for changes (RocketMQ: 5 s)."""
    acl_access_key: str | None = None
    """With `acl_secret_key`: the credentials this broker signs its requests to
    the name servers, controllers and its master with (RocketMQ 5's
    innerClientAuthenticationCredentials)."""
    acl_secret_key: str | None = field(default=None, repr=False)
    acl_grpc_clock_skew_s: float = 900.0
    """With `acl_file`: how far a gRPC client's signed x-mq-date-time may be from
    this broker's clock, either way (RocketMQ checks none; 15 min as AWS SigV4)."""
    auth_enabled: bool = False
    """Access control by the RocketMQ 5 users and ACLs this broker stores
    (data_dir/config/auth.json), with or without `acl_file` (which also turns
    it on); see docs/access-control.md."""
    auth_init_user: str | None = field(default=None, repr=False)
    """``NAME:PASSWORD``: a Super user created at start when no user has that
    name (RocketMQ 5's initAuthenticationUser): the way in for the first admin."""
    allow_anonymous: bool = False
    """Let `tidemq broker` listen on a non-loopback `listen_host` without access
    control (no `acl_file`, no `auth_enabled`): anyone who reaches the ports may
    produce, consume and administer. Off, it refuses to start there."""
    ha_listen_port: int | None = None
    """The HA port slaves copy the commitlog from (haListenPort): None is the
    listen port + 1 (a free port when listen_port is 0), 0 a free port."""
    enable_controller_mode: bool = False
    """Register and beat to RocketMQ 5's controller (enableControllerMode):
    it records this replica, elects a master among the in-sync replicas when
    the master dies, and fences a replaced master (docs/replication.md)."""
    controller_addr: str = ""
    """The controllers' addresses, "host:port;host:port" (controllerAddr)."""
    sync_state_set_check_interval_ms: int = 5000
    """How often a master checks whether its SyncStateSet should shrink or
    grow (checkSyncStateSetPeriod)."""
    ha_max_time_slave_not_catchup_ms: int = 15_000
    """A member of the SyncStateSet behind the master's end this long is
    dropped from it (haMaxTimeSlaveNotCatchup)."""
    ha_advertised_address: str | None = None
    """The HA address the other replicas are told to copy from, when it is not
    advertised_host and the HA port (a NAT, or a proxy in a partition test)."""
    controller_heartbeat_timeout_ms: int = 10_000
    """A replica silent this long is dead to the controller
    (controllerHeartBeatTimeoutMills)."""
    broker_heartbeat_interval_ms: int = 1000
    """How often the broker beats to every controller (brokerHeartbeatInterval)."""
    broker_election_priority: int = 2**31 - 1
    """Lower is elected first among equals (brokerElectionPriority)."""
    ha_master_address: str | None = None
    """A slave's master HA address, host:port (haMasterAddress); None: the one
    the name server answers its registration with."""
    ha_send_heartbeat_interval_ms: int = 5000
    """An idle HA connection sends a heartbeat (master) or a report (slave)
    this often (haSendHeartbeatInterval)."""
    ha_housekeeping_interval_ms: int = 20000
    """An HA connection silent this long is closed (haHousekeepingInterval)."""
    ha_transfer_batch_size: int = 32 * 1024
    """Commitlog bytes in one HA transfer at most (haTransferBatchSize)."""
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    """A SYNC_MASTER whose nearest slave is this many bytes behind does not wait
    for it: SLAVE_NOT_AVAILABLE (haMaxGapNotInSync; haSlaveFallbehindMax in 4.x)."""
    slave_timeout_ms: int = 3000
    """How long a SYNC_MASTER waits for a slave's acknowledgement before it
    answers FLUSH_SLAVE_TIMEOUT (slaveTimeout)."""
    slave_sync_interval_s: float = 10.0
    """How often a slave copies its master's topics, groups, consumer and delay
    offsets (RocketMQ's SlaveSynchronize: every 10 s); also at once when it
    learns its master."""
    slave_read_enable: bool = False
    """Suggest a slave to consumers that are far behind (BrokerConfig.slaveReadEnable,
    default false): see tidemq.broker.slave_read."""
    access_message_in_memory_max_ratio: int = DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO
    """A consumer further behind than this percent of physical memory (in
    commitlog bytes) is "consuming slowly" (MessageStoreConfig.accessMessageInMemoryMaxRatio)."""
    access_message_in_memory_max_bytes: int | None = None
    """tidemq: this many bytes instead of the ratio of physical memory (a
    threshold that does not depend on the machine: tests, shared page caches)."""
    offset_check_in_slave: bool = False
    """A slave corrects a consumer's illegal offset as a master does
    (MessageStoreConfig.offsetCheckInSlave); off: it leaves it to the master."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_role()
        self._check_controller()
        if not 10 <= self.timer_precision_ms <= 1000:
            raise ValueError(
                f"timer_precision_ms={self.timer_precision_ms}: must be 10..1000 milliseconds"
            )
        if not 1 <= self.timer_max_delay_s <= MAX_TIMER_HORIZON_S:
            raise ValueError(
                f"timer_max_delay_s={self.timer_max_delay_s}: must be 1..{MAX_TIMER_HORIZON_S}"
                " seconds (365 days)"
            )
        if self.transaction_check_max < 1 or self.transaction_check_interval_ms < 1:
            raise ValueError("transaction_check_max and transaction_check_interval_ms must be > 0")
        if not 0 < self.disk_force_clean_ratio <= self.disk_warning_ratio <= 1:
            raise ValueError(
                "disk ratios must satisfy 0 < disk_force_clean_ratio <= disk_warning_ratio <= 1"
            )
        if not 0 < self.disk_max_used_ratio <= 1 or self.retention_interval_s <= 0:
            raise ValueError("disk_max_used_ratio must be in (0, 1], retention_interval_s > 0")
        if not isinstance(self.trace_on, bool):
            raise ValueError(f"trace_on={self.trace_on!r}: must be true or false")
        if (
            not isinstance(self.region_id, str)
            or not self.region_id
            or not all(" " <= c <= "~" for c in self.region_id)
        ):
            raise ValueError(
                f"region_id={self.region_id!r}: must be printable ASCII, not empty "
                "(it is stored as a message property and written into trace records)"
            )
        problem = validate_topic_name(self.msg_trace_topic_name)
        if problem is not None:
            raise ValueError(f"msg_trace_topic_name: {problem}")
        if self.short_polling_time_ms < 1:
            raise ValueError(f"short_polling_time_ms={self.short_polling_time_ms}: must be >= 1")
        parse_permission(self.broker_permission)  # ValueError when out of 0..7
        for name in (
            "grpc_default_invisible_ms",
            "grpc_renew_ahead_ms",
            "grpc_renew_period_ms",
            "grpc_renew_max_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be >= 1")
        if not 0 <= self.min_invisible_time_mills_for_recv <= MAX_INVISIBLE_TIME_MS:
            raise ValueError(
                f"min_invisible_time_mills_for_recv={self.min_invisible_time_mills_for_recv}: "
                f"must be 0..{MAX_INVISIBLE_TIME_MS} milliseconds (12 hours)"
            )
        if self.connection_max_idle_s < 0:
            raise ValueError(f"connection_max_idle_s={self.connection_max_idle_s}: must be >= 0")
        if self.frame_buffer_budget_bytes < 1 or self.frame_timeout_s <= 0:
            raise ValueError("frame_buffer_budget_bytes and frame_timeout_s must be > 0")
        if (self.acl_access_key is None) != (self.acl_secret_key is None):
            raise ValueError("acl_access_key and acl_secret_key go together")
        if self.grpc_max_connections < 1:
            raise ValueError(f"grpc_max_connections={self.grpc_max_connections}: must be >= 1")
        if self.acl_poll_interval_s <= 0:
            raise ValueError(f"acl_poll_interval_s={self.acl_poll_interval_s}: must be > 0")
        if self.acl_grpc_clock_skew_s < 0:
            raise ValueError(f"acl_grpc_clock_skew_s={self.acl_grpc_clock_skew_s}: must be >= 0")
        self.remoting_tls  # noqa: B018 (raises TlsConfigError, a ValueError, if unusable)
        if self.grpc_port is not None:
            self.grpc_tls  # noqa: B018
        self.namesrv_client_tls  # noqa: B018
        self.master_client_tls  # noqa: B018
        self.metrics_labels  # noqa: B018 (raises ValueError if malformed)
        if self.auth_init_user is not None:
            name, colon, password = self.auth_init_user.partition(":")
            if not (name and colon and password):
                raise ValueError("auth_init_user: expected NAME:PASSWORD")

    def _check_controller(self) -> None:
        if not self.enable_controller_mode:
            return
        try:
            addresses = parse_addresses(self.controller_addr)
        except ValueError as exc:
            raise ValueError(f"controller_addr: {exc}") from None
        if not addresses:
            raise ValueError(
                'enable_controller_mode needs controller_addr ("host:port;host:port": '
                "the name servers started with --enable-controller)"
            )
        if self.controller_heartbeat_timeout_ms <= self.broker_heartbeat_interval_ms:
            raise ValueError(
                f"controller_heartbeat_timeout_ms={self.controller_heartbeat_timeout_ms} must be "
                f"longer than broker_heartbeat_interval_ms={self.broker_heartbeat_interval_ms}"
            )
        if self.broker_heartbeat_interval_ms <= 0:
            raise ValueError("broker_heartbeat_interval_ms must be > 0")
        if self.broker_id < 1:
            raise ValueError(
                f"broker_id={self.broker_id}: in controller mode broker_id is this replica's id "
                "within its broker name, 1 and up (the controller's ids start at 1; the "
                "replica it makes master registers with the name servers as 0)"
            )
        if self.listen_port == 0:
            raise ValueError(
                "controller mode needs a fixed listen_port: the controller and the other "
                "replicas know this broker by its address, across role changes and restarts"
            )

    @property
    def controller_addresses(self) -> tuple[str, ...]:
        return parse_addresses(self.controller_addr)

    def _check_role(self) -> None:
        raw: object = self.broker_role
        role = raw if isinstance(raw, BrokerRole) else BrokerRole.parse(str(raw))
        object.__setattr__(self, "broker_role", role)  # a name given in Python code
        if self.broker_id < 0:
            raise ValueError(f"broker_id={self.broker_id}: must be 0 (master) or more (slave)")
        if self.enable_controller_mode:
            pass  # the controller gives the role; broker_id is the replica's id (_check_controller)
        elif role is BrokerRole.SLAVE and self.broker_id == 0:
            raise ValueError(
                "broker_role SLAVE with broker_id 0: 0 is the master's id, a slave has "
                "broker_id 1 or more"
            )
        if role.is_master and self.broker_id != 0 and not self.enable_controller_mode:
            raise ValueError(
                f"broker_id={self.broker_id} is a slave's id, but broker_role is {role.value}: "
                'a master has broker_id 0; a slave needs "broker_role": "SLAVE"'
            )
        if self.ha_listen_port is not None and not 0 <= self.ha_listen_port <= 65535:
            raise ValueError(f"ha_listen_port={self.ha_listen_port}: must be 0..65535")
        if self.ha_master_address is not None:
            host, colon, port = self.ha_master_address.rpartition(":")
            if not (host and colon and port.isdigit() and 0 < int(port) <= 65535):
                raise ValueError(
                    f"ha_master_address={self.ha_master_address!r}: expected host:port"
                )
        if self.slave_sync_interval_s <= 0:
            raise ValueError(f"slave_sync_interval_s={self.slave_sync_interval_s}: must be > 0")
        in_memory_limit(0, self.access_message_in_memory_max_ratio)  # raises if not 0..100
        if (self.access_message_in_memory_max_bytes or 0) < 0:
            raise ValueError(
                f"access_message_in_memory_max_bytes={self.access_message_in_memory_max_bytes}:"
                " must be >= 0"
            )
        self.ha_settings  # noqa: B018 (raises ValueError naming a bad HA setting)

    @property
    def ha_settings(self) -> HaSettings:
        """The HA stream's settings (tidemq.ha.config), from the ha_* fields."""
        return HaSettings(
            heartbeat_interval_s=self.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_interval_s=self.ha_housekeeping_interval_ms / 1000,
            transfer_batch_size=self.ha_transfer_batch_size,
            slave_timeout_s=self.slave_timeout_ms / 1000,
            max_gap_not_in_sync=self.ha_max_gap_not_in_sync,
        )

    def ha_port(self, bound_listen_port: int) -> int:
        """The port to bind the HA server to, once the listen port is bound."""
        if self.ha_listen_port is not None:
            return self.ha_listen_port
        return 0 if self.listen_port == 0 else bound_listen_port + 1

    @property
    def remoting_tls(self) -> ServerTls:
        """The remoting port's TLS (tls_settings.py)."""
        return tls_settings.remoting_tls(
            self.tls_mode, self.tls_cert, self.tls_key, self.tls_ca, self.tls_verify_client
        )

    @property
    def grpc_tls(self) -> ServerTls:
        """The gRPC endpoint's TLS (tls_settings.py)."""
        return tls_settings.grpc_tls(
            self.remoting_tls,
            self.tls_mode is not None,
            self.grpc_tls_mode,
            self.grpc_tls_cert,
            self.grpc_tls_key,
        )

    @property
    def inner_credentials(self) -> Credentials | None:
        """What this broker signs its requests to name servers, controllers and its
        master with (None: it does not sign)."""
        if self.acl_access_key is None or self.acl_secret_key is None:
            return None
        return Credentials(self.acl_access_key, self.acl_secret_key)

    @property
    def namesrv_client_tls(self) -> TlsConfig | None:
        """How this broker connects to its name servers (None: plain)."""
        return self._client_tls(self.namesrv_tls)

    @property
    def master_client_tls(self) -> TlsConfig | None:
        """How this broker connects to its master (None: plain)."""
        return self._client_tls(self.namesrv_tls if self.master_tls is None else self.master_tls)

    def _client_tls(self, enabled: bool) -> TlsConfig | None:
        return tls_settings.client_tls(
            enabled,
            self.namesrv_tls_ca,
            self.namesrv_tls_cert,
            self.namesrv_tls_key,
            self.namesrv_tls_check_hostname,
        )

    @property
    def metrics_counting(self) -> bool:
        """Whether the figures only /metrics shows are counted (it is served and on)."""
        return self.metrics_enable and self.http_port is not None

    @property
    def metrics_labels(self) -> dict[str, str]:
        """`metrics_label` parsed; ValueError names a malformed pair."""
        return parse_metrics_label(self.metrics_label)

    @property
    def access_control(self) -> bool:
        """Whether requests are checked at all (a policy file, or the 5.x users)."""
        return self.acl_file is not None or self.auth_enabled

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "store"

    @property
    def config_dir(self) -> Path:
        return self.data_dir / "config"

    def with_port(self, port: int) -> BrokerConfig:
        return dataclasses.replace(self, listen_port=port)

    @classmethod
    def from_file(cls, path: Path) -> BrokerConfig:
        """Load a JSON file whose keys are this class's field names.

        Cluster mode (`tidemq broker --config FILE`) defaults to no topic
        auto-creation, as RocketMQ's cluster deployments do.
        """
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ValueError(f"{path}: unknown settings {', '.join(unknown)}")
        raw.setdefault("auto_create_topic", False)
        raw["data_dir"] = Path(raw.get("data_dir", path.parent / raw.get("broker_name", "broker")))
        if "namesrv_addrs" in raw:
            addrs = raw["namesrv_addrs"]
            raw["namesrv_addrs"] = tuple([addrs] if isinstance(addrs, str) else addrs)
        if "flush_mode" in raw:
            raw["flush_mode"] = FlushMode(raw["flush_mode"])
        if "broker_role" in raw:
            raw["broker_role"] = BrokerRole.parse(str(raw["broker_role"]))
        return cls(**raw)

    @classmethod
    def parse_overrides(cls, items: Iterable[str]) -> dict[str, Any]:
        """ "key=value" settings as typed field values; ValueError names a bad one."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        result: dict[str, Any] = {}
        for item in items:
            key, sep, text = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in fields or key in _NOT_SETTABLE:
                settable = ", ".join(sorted(set(fields) - _NOT_SETTABLE))
                raise ValueError(f"{item!r} is not KEY=VALUE with KEY one of: {settable}")
            result[key] = _coerce(key, hints[key], text.strip())
        return result

    @property
    def address(self) -> str:
        return f"{self.advertised_host}:{self.listen_port}"


_NOT_SETTABLE = frozenset(
    {
        "data_dir",
        "extra",
        "namesrv_addrs",
        "listen_host",
        "listen_port",
        "grpc_port",
        "http_port",
        "grpc_tls_cert",
        "grpc_tls_key",
        "tls_mode",
        "tls_cert",
        "tls_key",
        "tls_ca",
        "tls_verify_client",
        "namesrv_tls",
        "namesrv_tls_ca",
        "namesrv_tls_cert",
        "namesrv_tls_key",
        "namesrv_tls_check_hostname",
        "acl_access_key",
        "acl_secret_key",
        "auth_init_user",
        "allow_anonymous",
    }
)
"""Set by serve's own options."""


def _coerce(key: str, hint: Any, text: str) -> Any:
    kinds = set(typing.get_args(hint)) or {hint}
    if text.lower() in ("none", "null") and type(None) in kinds:
        return None
    try:
        if bool in kinds:
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError("expected true or false")
            return lowered in ("true", "1", "yes")
        if int in kinds:
            return int(text)
        if float in kinds:
            return float(text)
        if FlushMode in kinds:
            return FlushMode(text)
        if BrokerRole in kinds:
            return BrokerRole.parse(text)
    except ValueError as exc:
        raise ValueError(f"{key}={text!r}: {exc}") from None
    return text


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def parse_metrics_label(text: str) -> dict[str, str]:
    """ "cluster_env:prod,zone:a" -> {"cluster_env": "prod", "zone": "a"}; empty
    items are skipped (Java's Splitter.omitEmptyStrings); a pair that is not
    NAME:VALUE with a Prometheus label name is a ValueError."""
    labels: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, colon, value = item.strip().partition(":")
        if not colon or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"metrics_label: {item!r} is not NAME:VALUE with a label name")
        labels[name] = value
    return labels
