"""`tidemq cluster up|status|down`: a whole cluster on this machine, over local_cluster.py.

`up` prints what it started and returns (the servers run on, detached);
`status` and `down` find them through the data directory's cluster.json.
Every command takes `--json`.
"""

from __future__ import annotations

from pathlib import Path

import click

from tidemq.broker.config import BrokerConfig
from tidemq.cli.local_cluster import ROLES, ClusterError, ClusterPlan, LocalCluster
from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort
from tidemq.cli.store_commands import json_option

_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Where the servers keep their stores, configs, logs and cluster.json.",
)


def _show(cluster: LocalCluster, as_json: bool, title: str) -> None:
    rows = cluster.status()
    if as_json:
        emit({"namesrv": cluster.namesrv, "nodes": rows}, as_json=True)
        return
    table = [
        {
            key: ("yes" if row[key] is True else "NO" if row[key] is False else row[key])
            for key in ("name", "role", "address", "ha", "pid", "running")
        }
        for row in rows
    ]
    emit(table, as_json=False, title=title)
    click.echo(f"name server: {cluster.namesrv}   (export TIDEMQ_NAMESRV={cluster.namesrv})")


@click.command("up")
@_DATA_DIR
@click.option(
    "--brokers",
    type=click.IntRange(1, 26),
    default=1,
    show_default=True,
    help="Broker names (broker-a, broker-b, ...), each a master and its slaves.",
)
@click.option(
    "--replicas",
    type=click.IntRange(1, 9),
    default=2,
    show_default=True,
    help="Copies of each broker's messages: a master and REPLICAS - 1 slaves.",
)
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default="SYNC_MASTER",
    show_default=True,
    help="The masters' role: SYNC_MASTER answers a send once a slave has it.",
)
@click.option(
    "--flush",
    type=click.Choice(["sync", "async"]),
    default="async",
    show_default=True,
    help="Every broker's flush mode.",
)
@click.option(
    "--base-port",
    type=click.IntRange(1024, 65000),
    default=None,
    help="Fixed ports: the name server on it, broker i's copy j on "
    "BASE + 100*(i+1) + 10*j (HA one above). Default: free ports.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker setting for every broker (repeatable), e.g. slave_timeout_ms=1000.",
)
@click.option(
    "--controller",
    is_flag=True,
    help="Start the name server with its embedded controller (--enable-controller) "
    "and the brokers in controller mode (enable_controller_mode, controller_addr).",
)
@click.option(
    "--grpc",
    is_flag=True,
    help="Each broker serves RocketMQ 5 (gRPC) clients too, on a free port (two above "
    "its remoting port with --base-port); any broker's endpoint routes to all of them.",
)
@json_option
def cluster_up(
    data_dir: Path,
    brokers: int,
    replicas: int,
    role: str,
    flush: str,
    base_port: int | None,
    overrides: tuple[str, ...],
    controller: bool,
    grpc: bool,
    as_json: bool,
) -> None:
    """Start a name server and, per broker, a master and its slaves, each its own
    process on 127.0.0.1, and return once every slave is copying its master;
    print their addresses. They run on after this command: `tidemq cluster down
    --data-dir DIR` stops them."""
    try:
        settings = BrokerConfig.parse_overrides(overrides)
        plan = ClusterPlan(
            brokers, replicas, role, flush, base_port, settings, controller, grpc=grpc
        )
        cluster = LocalCluster(data_dir)
        cluster.up(plan)
    except (ClusterError, ValueError) as exc:
        abort(str(exc))
    _show(cluster, as_json, f"cluster started from {cluster.data_dir}")


@click.command("status")
@_DATA_DIR
@click.option(
    "--env",
    "as_env",
    is_flag=True,
    help="Print only `export TIDEMQ_NAMESRV=...`, for a shell's eval.",
)
@json_option
def cluster_status(data_dir: Path, as_env: bool, as_json: bool) -> None:
    """The processes `cluster up` started from DIR: role, addresses, pid, running or
    not (`tidemq cluster list` shows what the name server knows: lag, in sync)."""
    try:
        cluster = LocalCluster.load(data_dir)
    except ClusterError as exc:
        abort(str(exc))
    if as_env:
        click.echo(f"export TIDEMQ_NAMESRV={cluster.namesrv}")
        return
    _show(cluster, as_json, f"cluster of {cluster.data_dir}")


@click.command("down")
@_DATA_DIR
@json_option
def cluster_down(data_dir: Path, as_json: bool) -> None:
    """Stop every process `cluster up` started from DIR (SIGTERM, then SIGKILL after
    30 s); the stores stay, a later `up` starts from them."""
    try:
        cluster = LocalCluster.load(data_dir)
    except ClusterError as exc:
        abort(str(exc))
    results = cluster.down()
    emit(results, as_json=as_json, title=f"cluster of {cluster.data_dir} stopped")


LOCAL_CLUSTER_COMMANDS: tuple[click.Command, ...] = (cluster_up, cluster_status, cluster_down)
"""Added to the `tidemq cluster` group by main.py."""
