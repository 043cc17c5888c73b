"""Server commands: `tidemq serve` (name server + broker in one process),
`tidemq namesrv` and `tidemq broker --config FILE`.

Each runs one asyncio loop until SIGINT or SIGTERM, then shuts down in the
documented order (the broker stops accepting, finishes in-flight requests,
flushes and checkpoints the store and unregisters; then the name server
stops) and exits 0. Once everything listens, one line goes to stdout and is
flushed, for scripts and tests to wait on:

    tidemq ready namesrv=HOST:PORT broker=HOST:PORT grpc=HOST:PORT      (serve)
    tidemq ready namesrv=HOST:PORT [http=HOST:PORT]                     (namesrv)
    tidemq ready broker=HOST:PORT name=NAME cluster=C role=R id=N ha=HOST:PORT
                 [grpc=HOST:PORT] [http=HOST:PORT]                  (broker)

Port 0 picks a free port; the ready line shows the real one. `grpc=` is
there when the RocketMQ 5 gRPC endpoint is served (serve: port 8081 unless
--no-grpc; broker: with --grpc-port or the config's grpc_port).

The event loop is uvloop unless TIDEMQ_EVENT_LOOP=asyncio selects asyncio's
own (tidemq.common.event_loop); the serve banner (`loop=`) and the INFO log
(`tidemq -v`) name it.

After a signal, once everything has shut down, one last line says so:

    tidemq stopped signal=SIGTERM                                       (or SIGINT)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from tidemq.acl.credentials import Credentials
from tidemq.broker.config import BrokerConfig
from tidemq.broker.tls_settings import remoting_tls
from tidemq.cli.defaults import default_data_dir
from tidemq.cli.limits import raise_open_files_limit
from tidemq.cli.output import console, fail
from tidemq.common import event_loop
from tidemq.common.version import __version__
from tidemq.controller.config import ControllerConfig
from tidemq.server.allocator import keep_freed_heap
from tidemq.server.collector import collector_choice, settle_collector
from tidemq.store.config import FlushMode
from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfigError, TlsMode

# The servers are imported when a server command runs, so that the admin
# commands start fast and do not depend on the server modules.

log = logging.getLogger(__name__)

_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _abort(message: str) -> NoReturn:
    fail(message)
    raise click.ClickException(message)  # fail() always raises; this satisfies the checker


def _ready(**addresses: str) -> None:
    settle_collector()  # the startup heap is built: freeze it (tidemq.server.collector)
    fields = " ".join(f"{key}={value}" for key, value in addresses.items())
    sys.stdout.write(f"tidemq ready {fields}\n")
    sys.stdout.flush()


def _stopped(signal_name: str) -> None:
    sys.stdout.write(f"tidemq stopped signal={signal_name}\n")
    sys.stdout.flush()


@contextlib.asynccontextmanager
async def _stop_signals() -> AsyncIterator[asyncio.Event]:
    """An event set by the first SIGINT/SIGTERM; handlers removed on exit, and
    the "stopped" line printed then if a signal ended the run (not an error)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            log.warning("%s again: already shutting down", name)
            return
        log.info("%s: shutting down", name)
        received.append(name)
        stop.set()

    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    stopped_cleanly = False
    try:
        yield stop
        stopped_cleanly = True
    finally:
        for signum in _STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    if stopped_cleanly and received:
        _stopped(received[0])


async def _start(what: str, address: str, start: Callable[[], Awaitable[Any]]) -> None:
    """Run `start`; a failure is one line that names what failed: the data
    directory's owner, the file or directory, else the address."""
    from tidemq.acl.auth_model import AuthModelError
    from tidemq.acl.plain_config import AclConfigError
    from tidemq.store.lock import StoreLockedError

    try:
        await start()
    except (StoreLockedError, AclConfigError, AuthModelError) as exc:
        _abort(f"cannot start the {what}: {exc}")
    except OSError as exc:
        reason = (os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))).lower()
        if exc.filename is not None:
            _abort(f"cannot start the {what}: {exc.filename}: {reason}")
        _abort(f"cannot start the {what} on {address}: {reason}")


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    raise_open_files_limit()
    try:
        collector_choice()
        keep_freed_heap()
        loop = event_loop.configured_loop()
    except (ValueError, RuntimeError) as exc:
        _abort(str(exc))
    log.info("event loop: %s", loop)
    with contextlib.suppress(KeyboardInterrupt):  # a signal before the handlers are in
        event_loop.run(main())


# -- tidemq serve -----------------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


def tls_options(command: F) -> F:
    """--tls-mode/--tls-cert/--tls-key/--tls-ca/--tls-verify-client: the
    ports' TLS, RocketMQ's tls.server.* settings (tidemq.broker.tls_settings)."""
    path = click.Path(path_type=Path, dir_okay=False, exists=True)
    options = [
        click.option(
            "--tls-mode",
            type=click.Choice([mode.value for mode in TlsMode]),
            default=None,
            help="disabled: plain only; permissive: plain and TLS on the same port; "
            "enforcing: TLS only. Default: permissive with --tls-cert, else disabled.",
        ),
        click.option(
            "--tls-cert",
            type=path,
            default=None,
            help="PEM certificate of the ports (see `tidemq cert`).",
        ),
        click.option("--tls-key", type=path, default=None, help="PEM private key for --tls-cert."),
        click.option(
            "--tls-ca",
            type=path,
            default=None,
            help="PEM CA client certificates must chain to (with --tls-verify-client).",
        ),
        click.option(
            "--tls-verify-client",
            type=click.Choice([auth.value for auth in ClientAuth]),
            default=ClientAuth.NONE.value,
            show_default=True,
            help="Ask TLS clients for a certificate signed by --tls-ca: none, optional, require.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


grpc_tls_mode_option = click.option(
    "--grpc-tls-mode",
    type=click.Choice([mode.value for mode in TlsMode]),
    default=None,
    help="The gRPC endpoint's own TLS mode (the same values, certificate and client "
    "verification). Default: --tls-mode when given, else enforcing with --tls-cert "
    "and disabled without.",
)


def _tls_settings(
    mode: str | None,
    cert: Path | None,
    key: Path | None,
    ca: Path | None,
    verify: str,
    grpc_mode: str | None = None,
) -> dict[str, Any]:
    """The BrokerConfig fields of the TLS options; a setting that cannot work is
    one line and exit 1, before anything listens."""
    if (cert is None) != (key is None):
        _abort("--tls-cert and --tls-key go together")
    settings: dict[str, Any] = {
        "tls_mode": mode,
        "tls_cert": str(cert) if cert else None,
        "tls_key": str(key) if key else None,
        "tls_ca": str(ca) if ca else None,
        "tls_verify_client": verify,
    }
    if grpc_mode is not None:
        settings["grpc_tls_mode"] = grpc_mode
    try:
        remoting_tls(
            mode, settings["tls_cert"], settings["tls_key"], settings["tls_ca"], verify
        ).context()
    except TlsConfigError as exc:
        _abort(f"--tls-mode: {exc}")
    return settings


def _server_tls(settings: dict[str, Any]) -> ServerTls:
    return remoting_tls(
        settings["tls_mode"],
        settings["tls_cert"],
        settings["tls_key"],
        settings["tls_ca"],
        settings["tls_verify_client"],
    )


def _internal_credentials() -> Credentials:
    """A per-process admin account for serve's broker at serve's name server."""
    return Credentials(f"tidemq-serve-{secrets.token_hex(8)}", secrets.token_urlsafe(32))


def _is_loopback(host: str) -> bool:
    """Only this machine can connect (an IP literal, or "localhost")."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _refuse_open_listener(host: str, remedy: str, anonymous: str = "--allow-anonymous") -> None:
    """Secure by default (issue #17): a server without access control listens on
    this machine only; elsewhere `remedy` or --allow-anonymous must say so. One
    line and exit 1, before anything listens."""
    if _is_loopback(host):
        return
    _abort(
        f"refusing to listen on {host or '*'} without access control: {remedy}, "
        f"or {anonymous} to let in anyone who can reach it"
    )


def _allow_anonymous_option(without: str, then: str) -> Callable[[F], F]:
    return click.option(
        "--allow-anonymous",
        is_flag=True,
        help=f"Listen on a non-loopback address without {without} ({then}).",
    )


def _check_acl_file(path: Path) -> None:
    """A policy file that cannot be used is one line and exit 1, before anything starts."""
    from tidemq.acl.plain_config import AclConfigError, load_plain_acl

    try:
        load_plain_acl(path)
    except AclConfigError as exc:
        _abort(f"--acl: {exc}")


@click.command("serve")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the broker keeps its store and config (default: $TIDEMQ_HOME or ~/.tidemq).",
)
@click.option(
    "--namesrv-port",
    type=click.IntRange(0, 65535),
    default=9876,
    show_default=True,
    help="0 picks a free port.",
)
@click.option(
    "--broker-port",
    type=click.IntRange(0, 65535),
    default=10911,
    show_default=True,
    help="0 picks a free port.",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    default=8081,
    show_default=True,
    help="The RocketMQ 5 gRPC endpoint (official 5.x clients); 0 picks a free port.",
)
@click.option("--no-grpc", is_flag=True, help="Do not serve the gRPC endpoint.")
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve /metrics (Prometheus), the JSON API and the dashboard on this port "
    "(0 picks a free port); default: no HTTP endpoint.",
)
@tls_options
@grpc_tls_mode_option
@click.option(
    "--flush",
    type=click.Choice(["async", "sync"]),
    default="async",
    show_default=True,
    help="sync: answer a send only once it is on disk.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--acl",
    "acl_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="RocketMQ plain_acl.yml: every request must be allowed by it (ACL 1.0), on the "
    "remoting port and the gRPC endpoint; reloaded when it changes.",
)
@click.option(
    "--auth",
    "auth_enabled",
    is_flag=True,
    help="Access control by the RocketMQ 5 users and ACLs the broker stores "
    "(tidemq user / tidemq acl); on by itself with --acl too.",
)
@click.option(
    "--auth-init-user",
    metavar="NAME:PASSWORD",
    envvar="TIDEMQ_AUTH_INIT_USER",
    show_envvar=True,
    default=None,
    help="Create this Super user at start if no user has the name; implies --auth "
    "(prefer the environment variable: a command line is visible to other local users).",
)
@_allow_anonymous_option(
    "--acl", "anyone who reaches the ports may produce, consume and administer"
)
@click.option(
    "--advertised-host",
    default=None,
    help="IPv4 address clients are told to use (default: --host, or 127.0.0.1 "
    "when --host is a wildcard).",
)
@click.option(
    "--set",
    "settings",
    metavar="KEY=VALUE",
    multiple=True,
    help="Override a broker setting (a BrokerConfig field), e.g. "
    "--set max_reconsume_times=3 --set delay_levels='1s 5s 10s'. Repeatable.",
)
def serve(
    data_dir: Path | None,
    namesrv_port: int,
    broker_port: int,
    grpc_port: int,
    no_grpc: bool,
    http_port: int | None,
    tls_mode: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_ca: Path | None,
    tls_verify_client: str,
    grpc_tls_mode: str | None,
    flush: str,
    host: str,
    acl_file: Path | None,
    auth_enabled: bool,
    auth_init_user: str | None,
    allow_anonymous: bool,
    advertised_host: str | None,
    settings: tuple[str, ...],
) -> None:
    """Run a standalone name server and broker in one process (topics auto-created)."""
    if acl_file is None and not allow_anonymous:
        _refuse_open_listener(host, "give --acl FILE")
    root = data_dir if data_dir is not None else default_data_dir()
    advertised = advertised_host or ("127.0.0.1" if host in _WILDCARD_HOSTS else host)
    try:
        overrides = BrokerConfig.parse_overrides(settings)
        dataclasses.replace(BrokerConfig(data_dir=root), **overrides)  # the checks of the values
    except ValueError as exc:
        _abort(f"--set: {exc}")
    overrides["grpc_port"] = None if no_grpc else grpc_port
    overrides["http_port"] = http_port
    overrides.update(
        _tls_settings(tls_mode, tls_cert, tls_key, tls_ca, tls_verify_client, grpc_tls_mode)
    )
    if acl_file is not None:
        _check_acl_file(acl_file)
        overrides.update(acl_file=str(acl_file))
    if auth_enabled or auth_init_user:
        overrides.update(auth_enabled=True, auth_init_user=auth_init_user)
        try:
            BrokerConfig(data_dir=root, auth_enabled=True, auth_init_user=auth_init_user)
        except ValueError as exc:
            _abort(f"--auth-init-user: {exc}")
    try:
        checked = dataclasses.replace(BrokerConfig(data_dir=root), **overrides)
        if checked.grpc_port is not None:
            checked.grpc_tls.context()  # gRPC's certificate files load, before anything listens
    except ValueError as exc:
        _abort(str(exc))
    _run(
        lambda: _serve(
            root, host, advertised, namesrv_port, broker_port, FlushMode(flush), overrides
        )
    )


async def _serve(
    root: Path,
    host: str,
    advertised: str,
    namesrv_port: int,
    broker_port: int,
    flush: FlushMode,
    overrides: dict[str, Any],
) -> None:
    from tidemq.namesrv.app import NameServer
    from tidemq.server.broker import Broker
    from tidemq.server.metrics import register_namesrv, remoting_rpc_stats

    acl_file = overrides.get("acl_file")
    trusted: tuple[Credentials, ...] = ()
    if acl_file is not None:
        # the broker registers with its own name server under an account only they know
        internal = _internal_credentials()
        trusted = (internal,)
        overrides = {
            **overrides,
            "acl_access_key": internal.access_key,
            "acl_secret_key": internal.secret_key,
        }
    namesrv_tls = _server_tls(overrides)
    if namesrv_tls.enabled:
        # the broker dials its own name server over TLS, pinning the certificate
        # (and showing it, to a name server that verifies clients)
        overrides = {
            **overrides,
            "namesrv_tls": True,
            "namesrv_tls_ca": overrides["tls_cert"],
            "namesrv_tls_cert": overrides["tls_cert"],
            "namesrv_tls_key": overrides["tls_key"],
            "namesrv_tls_check_hostname": False,
        }
    metrics = overrides.get("http_port") is not None
    namesrv_rpc = (
        remoting_rpc_stats() if metrics and overrides.get("metrics_enable", True) else None
    )
    async with _stop_signals() as stop:
        namesrv = NameServer(
            host=host,
            port=namesrv_port,
            acl_file=acl_file,
            trusted=trusted,
            tls=namesrv_tls,
            rpc_stats=namesrv_rpc,
        )
        await _start("name server", f"{host}:{namesrv_port}", namesrv.start)
        try:
            namesrv_address = f"{advertised}:{namesrv.port}"
            config = BrokerConfig(
                data_dir=root,
                listen_host=host,
                listen_port=broker_port,
                advertised_host=advertised,
                namesrv_addrs=(namesrv_address,),
                auto_create_topic=True,
                flush_mode=flush,
            )
            config = dataclasses.replace(config, **overrides)
            broker = Broker(config)
            if metrics:  # one /metrics shows the name server too
                register_namesrv(
                    broker.metrics_registry,
                    namesrv,
                    namesrv_address,
                    namesrv_rpc,
                    unit_suffix=config.metrics_unit_suffix,
                    extra_labels=config.metrics_labels,
                )
            await _start("broker", f"{host}:{broker_port}", broker.start)
            try:
                _banner(namesrv_address, broker.address, config, broker.grpc_address)
                _banner_http(broker.http_address)
                _ready(namesrv=namesrv_address, broker=broker.address, **_optional(broker))
                await stop.wait()
            finally:
                await broker.stop()
        finally:
            await namesrv.stop()


def _optional(broker: Any) -> dict[str, str]:
    """The ready line's fields for the endpoints that are on (gRPC, HTTP)."""
    fields = {"grpc": broker.grpc_address, "http": broker.http_address}
    return {name: address for name, address in fields.items() if address}


def _banner_http(address: str | None) -> None:
    if address is not None:
        console.print(
            f"Dashboard      [bold]http://{address}/[/]\n"
            f"Metrics        curl http://{address}/metrics\n",
            highlight=False,
            soft_wrap=True,
        )


def _banner(namesrv: str, broker: str, config: BrokerConfig, grpc: str | None) -> None:
    flag = "" if namesrv == "127.0.0.1:9876" else f" --namesrv {namesrv}"
    if config.remoting_tls.mode is TlsMode.ENFORCING:
        flag += f" --tls-ca {config.tls_cert}"
    grpc_tls = config.grpc_tls
    tls = (
        f"  TLS:    {_grpc_tls_text(grpc_tls)}; tls_enable=True (Python) / sslEnabled: true "
        "(Node), trusting the server's CA with GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (a "
        f"`tidemq cert` certificate is its own: {grpc_tls.cert})\n"
        if grpc and grpc_tls.enabled
        else ""
    )
    remoting_mode = config.remoting_tls.mode
    tls_line = (
        f"  TLS          {remoting_mode.value} on the name server and broker ports; "
        "clients: --tls --tls-ca CERT or tls=TlsConfig(ca=CERT)\n"
        if remoting_mode is not TlsMode.DISABLED
        else ""
    )
    acl = (
        f"  access       ACL on: {config.acl_file} (reloaded when it changes; both protocols)\n"
        "                clients sign with --access-key/--secret-key or credentials=\n"
        if config.acl_file
        else ""
    )
    if config.auth_enabled:
        acl += (
            "  access       RocketMQ 5 users and ACLs on (tidemq user / tidemq acl; "
            "both protocols)\n"
        )
    python_keys = '"ACCESS_KEY", "SECRET_KEY"' if config.access_control else ""
    node_keys = ", sessionCredentials: { accessKey, accessSecret }" if config.access_control else ""
    grpc_lines = (
        "RocketMQ 5 clients (official Python/Node, gRPC) connect to the endpoint:\n"
        f'  Python: ClientConfiguration("{grpc}", Credentials({python_keys}))\n'
        f"  Node:   endpoints: '{grpc}'{node_keys}\n{tls}\n"
        if grpc
        else ""
    )
    console.print(
        f"[bold]tidemq {__version__}[/] standalone server  (loop={event_loop.loop_name()})\n"
        f"  name server  [bold]{namesrv}[/]\n"
        f"  broker       [bold]{broker}[/]  ({config.broker_name}, cluster {config.cluster_name})\n"
        f"  data         {config.data_dir}  (flush: {config.flush_mode.value}, "
        "topics auto-created)\n" + acl + tls_line + "\n"
        "Try it from another terminal:\n"
        f"  tidemq topic create TopicTest{flag}\n"
        f"  tidemq send TopicTest 'hello' --tags TagA --keys order-1{flag}\n"
        f"  tidemq consume TopicTest --from-beginning{flag}\n"
        f"  tidemq cluster list{flag}\n"
        "\n"
        "RocketMQ clients connect through the name server:\n"
        f"  ali-ons (Node.js):  nameSrv: '{namesrv}'\n"
        f'  Java:               producer.setNamesrvAddr("{namesrv}")\n'
        "\n" + grpc_lines + ""
        "Stop with Ctrl-C (or SIGTERM); the data stays.",
        highlight=False,
        soft_wrap=True,
    )


def _grpc_tls_text(tls: ServerTls) -> str:
    """The gRPC port's TLS in a few words, for the banner."""
    text = {
        TlsMode.ENFORCING: "enforcing (TLS only)",
        TlsMode.PERMISSIVE: "permissive (TLS and plain on the port)",
    }.get(tls.mode, tls.mode.value)
    if tls.verify_client is not ClientAuth.NONE:
        text += f", client certificates {tls.verify_client.value}"
    return text


# -- tidemq namesrv -----------------------------------------------------------------------


@click.command("namesrv")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9876,
    show_default=True,
    help="0 picks a free port.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--acl",
    "acl_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="RocketMQ plain_acl.yml: registering brokers and deleting routes need an admin "
    "account (brokers sign with acl_access_key/acl_secret_key); reloaded when it changes.",
)
@_allow_anonymous_option(
    "--acl", "anyone who reaches the port may register brokers and delete routes"
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the name server's /metrics (Prometheus) on this port (0 picks a free "
    "port); default: no HTTP endpoint.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="JSON file with the controller's settings: enable_controller_in_namesrv, "
    "controller_port, controller_peers, controller_dir, scan_not_active_broker_ms, "
    "enable_elect_unclean_master (the flags below win).",
)
@click.option(
    "--enable-controller",
    is_flag=True,
    default=None,
    help="Run RocketMQ 5's controller inside this name server: brokers with "
    "enable_controller_mode and controller_addr set to the name servers' addresses "
    "fail over to an in-sync slave when their master dies.",
)
@click.option(
    "--controller-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="The controller's Raft port (default: the name server's port + 1).",
)
@click.option(
    "--controller-peers",
    default=None,
    help="Every controller's Raft address, 'host:port;host:port' (Java's "
    "controllerDLegerPeers): decisions need a majority of them. Default: this one alone.",
)
@click.option(
    "--controller-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the controller keeps its Raft journal (default: controller-data/PORT).",
)
@tls_options
def namesrv(
    port: int,
    host: str,
    acl_file: Path | None,
    allow_anonymous: bool,
    http_port: int | None,
    config_path: Path | None,
    enable_controller: bool | None,
    controller_port: int | None,
    controller_peers: str | None,
    controller_dir: Path | None,
    tls_mode: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_ca: Path | None,
    tls_verify_client: str,
) -> None:
    """Run a name server on its own (cluster mode)."""
    if acl_file is None and not allow_anonymous:
        _refuse_open_listener(host, "give --acl FILE")
    if acl_file is not None:
        _check_acl_file(acl_file)
    tls = _server_tls(_tls_settings(tls_mode, tls_cert, tls_key, tls_ca, tls_verify_client))
    from tidemq.cli.controller_settings import controller_config

    try:
        controller = controller_config(
            config_path,
            host=host,
            port=port,
            enable=enable_controller,
            raft_port=controller_port,
            peers=controller_peers,
            data_dir=controller_dir,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    _run(lambda: _namesrv(host, port, acl_file, tls, http_port, controller))


async def _namesrv(
    host: str,
    port: int,
    acl_file: Path | None,
    tls: ServerTls,
    http_port: int | None,
    controller_settings: ControllerConfig | None = None,
) -> None:
    from prometheus_client import CollectorRegistry

    from tidemq.namesrv.app import NameServer
    from tidemq.server.metrics import register_namesrv, remoting_rpc_stats
    from tidemq.web.app import build_metrics_app
    from tidemq.web.endpoint import HttpEndpoint

    rpc = remoting_rpc_stats() if http_port is not None else None
    async with _stop_signals() as stop:
        controller = None
        if controller_settings is not None:
            from tidemq.controller.service import Controller

            controller = Controller(controller_settings)
            await controller.start()
        server = NameServer(
            host=host,
            port=port,
            acl_file=acl_file,
            tls=tls,
            rpc_stats=rpc,
            extra_handlers=controller.handlers() if controller is not None else None,
        )
        try:
            await _start("name server", f"{host}:{port}", server.start)
        except BaseException:
            if controller is not None:
                await controller.stop()
            raise
        http: HttpEndpoint | None = None
        try:
            shown_host = "127.0.0.1" if host in _WILDCARD_HOSTS else host
            address = f"{shown_host}:{server.port}"
            fields = {"namesrv": address}
            if controller_settings is not None:
                fields["controller"] = controller_settings.raft_address
            if http_port is not None:
                registry = CollectorRegistry(auto_describe=True)
                register_namesrv(registry, server, address, rpc)
                http = HttpEndpoint(build_metrics_app(registry), host, http_port)
                await _start("name server's HTTP endpoint", f"{host}:{http_port}", http.start)
                fields["http"] = f"{shown_host}:{http.port}"
                console.print(
                    f"Metrics        curl http://{fields['http']}/metrics", highlight=False
                )
            _ready(**fields)
            await stop.wait()
        finally:
            if http is not None:
                await http.stop()
            await server.stop()
            if controller is not None:
                await controller.stop()


# -- tidemq broker ------------------------------------------------------------------------


@click.command("broker")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="JSON file whose keys are BrokerConfig fields (broker_name, listen_port, "
    "namesrv_addrs, data_dir, grpc_port, ...). Topics are not auto-created unless it says so.",
)
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the RocketMQ 5 gRPC endpoint on this port (0: a free one); "
    "default: the config's grpc_port, else none.",
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve /metrics, the JSON API and the dashboard on this port (0: a free one); "
    "default: the config's http_port, else none.",
)
@_allow_anonymous_option(
    "acl_file or auth_enabled in the config",
    "anyone who reaches the ports may produce, consume and administer",
)
@tls_options
@grpc_tls_mode_option
def broker(
    config_path: Path,
    grpc_port: int | None,
    http_port: int | None,
    allow_anonymous: bool,
    tls_mode: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_ca: Path | None,
    tls_verify_client: str,
    grpc_tls_mode: str | None,
) -> None:
    """Run one broker registering with the name servers of its config (cluster mode).

    The --tls-* options, when given, replace the config's tls_* keys
    (--grpc-tls-mode its grpc_tls_mode). On a non-loopback listen_host it
    needs access control (acl_file or auth_enabled) or --allow-anonymous
    (allow_anonymous in the config)."""
    try:
        config = BrokerConfig.from_file(config_path)
        if grpc_port is not None:
            config = dataclasses.replace(config, grpc_port=grpc_port)
        if http_port is not None:
            config = dataclasses.replace(config, http_port=http_port)
        if tls_mode is not None or tls_cert is not None:
            settings = _tls_settings(tls_mode, tls_cert, tls_key, tls_ca, tls_verify_client)
            config = dataclasses.replace(config, **settings)
        if grpc_tls_mode is not None:
            config = dataclasses.replace(config, grpc_tls_mode=grpc_tls_mode)
        config.remoting_tls.context()  # the files load, before anything listens
        if config.grpc_port is not None:
            config.grpc_tls.context()
    except OSError as exc:
        _abort(f"cannot read {config_path}: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        _abort(f"{config_path} is not valid JSON: {exc}")
    except (TypeError, ValueError) as exc:
        text = str(exc)
        _abort(text if text.startswith(str(config_path)) else f"{config_path}: {text}")
    if not (config.access_control or config.allow_anonymous or allow_anonymous):
        _refuse_open_listener(
            config.listen_host,
            f"set acl_file or auth_enabled in {config_path}",
            '--allow-anonymous (or "allow_anonymous": true in it)',
        )
    _run(lambda: _broker(config))


async def _broker(config: BrokerConfig) -> None:
    from tidemq.server.broker import Broker

    if config.enable_controller_mode:
        await _controlled_broker(config)
        return
    async with _stop_signals() as stop:
        server = Broker(config)
        await _start("broker", f"{config.listen_host}:{config.listen_port}", server.start)
        try:
            _broker_ready(server, config, config.broker_role.value, server.ha_address or "")
            await stop.wait()
        finally:
            await server.stop()


def _broker_ready(server: Any, config: BrokerConfig, role: str, ha: str) -> None:
    """The ready line of a broker (a Broker, the running one of a controller-mode replica)."""
    _ready(
        broker=server.address,
        name=config.broker_name,
        cluster=config.cluster_name,
        role=role,
        id=str(config.broker_id),
        ha=ha,
        **_optional(server),
    )


async def _controlled_broker(config: BrokerConfig) -> None:
    """A replica of a controller-mode broker set: the controller gives its role."""
    from tidemq.server.controlled import ControlledBroker

    async with _stop_signals() as stop:
        replica = ControlledBroker(config)
        await _start("broker", f"{config.listen_host}:{config.listen_port}", replica.start)
        try:
            server = replica.broker
            assert server is not None and replica.role is not None
            _broker_ready(server, config, replica.role.value, replica.ha_address)
            await stop.wait()
        finally:
            await replica.stop()


SERVER_COMMANDS: tuple[click.Command, ...] = (serve, namesrv, broker)
"""Everything this module adds to the `tidemq` group."""
