"""Admin commands: `tidemq topic|group|consumer|offset|cluster ...`, over
tidemq.client.admin.AdminClient (the message commands are in message_commands.py).

Every command takes `--namesrv HOST:PORT[;HOST:PORT]` (env TIDEMQ_NAMESRV) and
`--json`; people get rich tables, programs JSON. Any failure ends with a
one-line message (a JSON object with `--json`) and a non-zero exit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click

from tidemq.cli.output import emit
from tidemq.cli.plumbing import (
    abort,
    admin_options,
    iso_time,
    parse_properties,
    parse_timestamp,
    run_admin,
)
from tidemq.client.admin import (
    DEFAULT_CLUSTER,
    AdminClient,
    AdminError,
    QueueData,
    QueueOffset,
    QueueProgress,
)
from tidemq.client.model import perm_text
from tidemq.ha.acks import slave_available

# -- topic ---------------------------------------------------------------------------


@click.group("topic")
def topic_group() -> None:
    """Create, change, delete and inspect topics."""


@topic_group.command("create")
@click.argument("name")
@click.option("--queues", type=click.IntRange(1, 1024), default=4, show_default=True)
@click.option(
    "--perm",
    type=click.IntRange(0, 7),
    default=6,
    show_default=True,
    help="Permission bits: 4 read, 2 write.",
)
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True)
@click.option("--broker", "brokers", multiple=True, help="Only on this broker (repeatable).")
@click.option(
    "--attribute",
    "attributes",
    multiple=True,
    help="Topic attribute +KEY=VALUE (repeatable, RocketMQ 5).",
)
@click.option(
    "--type",
    "message_type",
    type=click.Choice(["normal", "fifo", "delay", "transaction", "mixed"]),
    default=None,
    help="Accept only this message type (RocketMQ 5's message.type attribute). Without it "
    "none is declared: shown as NORMAL (RocketMQ's default), every type accepted.",
)
@admin_options
def topic_create(
    name: str,
    queues: int,
    perm: int,
    cluster: str,
    brokers: tuple[str, ...],
    attributes: tuple[str, ...],
    message_type: str | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Create topic NAME on every master broker of the cluster (an existing topic
    is updated to these settings, and the output says what changed)."""
    attrs = parse_properties(attributes, "--attribute") if attributes else None
    if message_type is not None:
        attrs = dict(attrs or {})
        attrs["+message.type"] = message_type.upper()

    async def create(admin: AdminClient) -> tuple[dict[str, QueueData], list[str], str]:
        before = await admin.existing_queues(name)
        created = await admin.create_topic(
            name,
            queues=queues,
            perm=perm,
            brokers=brokers or None,
            cluster=cluster,
            attributes=attrs,
        )
        return before, created, await admin.topic_message_type(name)

    before, created, kind = run_admin(namesrv, create)
    after = {broker: QueueData(broker, queues, queues, perm) for broker in created}
    change = topic_change(before, after)
    data: dict[str, Any] = {
        "topic": name,
        "brokers": created,
        "queues": queues,
        "perm": perm if as_json else perm_text(perm),
        "type": kind,
    }
    if as_json:
        data["result"] = change.split(" ", 1)[0]
        data["previous"] = {
            broker: {
                "read_queues": q.read_queue_nums,
                "write_queues": q.write_queue_nums,
                "perm": q.perm,
            }
            for broker, q in sorted(before.items())
        } or None
    emit(data, as_json=as_json, title=f"topic {name} {change}")


def topic_change(before: Mapping[str, QueueData], after: Mapping[str, QueueData]) -> str:
    """What `topic create` did: "created", "unchanged", or "updated (4 → 8
    queues, perm RW- → R--)" for a topic that existed (RocketMQ's
    UPDATE_AND_CREATE_TOPIC creates or updates alike)."""
    if not before:
        return "created"
    kept = [broker for broker in after if broker in before]

    def shown(queues: Mapping[str, QueueData], show: Callable[[QueueData], str]) -> str:
        return "/".join(sorted({show(queues[broker]) for broker in kept}))

    changes = []
    old, new = shown(before, _queue_counts), shown(after, _queue_counts)
    if old != new:
        changes.append(f"{old} → {new} queues")
    old, new = shown(before, lambda q: perm_text(q.perm)), shown(after, lambda q: perm_text(q.perm))
    if old != new:
        changes.append(f"perm {old} → {new}")
    added = sorted(set(after) - set(before))
    if added:
        changes.append(f"now also on {', '.join(added)}")
    return f"updated ({', '.join(changes)})" if changes else "unchanged"


def _queue_counts(queue: QueueData) -> str:
    if queue.read_queue_nums == queue.write_queue_nums:
        return str(queue.write_queue_nums)
    return f"{queue.read_queue_nums} read, {queue.write_queue_nums} write"


@topic_group.command("update")
@click.argument("name")
@click.option("--queues", type=click.IntRange(1, 1024), help="Read and write queues.")
@click.option("--read-queues", type=click.IntRange(1, 1024))
@click.option("--write-queues", type=click.IntRange(1, 1024))
@click.option("--perm", type=click.IntRange(0, 7), help="Permission bits: 4 read, 2 write.")
@admin_options
def topic_update(
    name: str,
    queues: int | None,
    read_queues: int | None,
    write_queues: int | None,
    perm: int | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Change the queue counts or permission of topic NAME."""
    if queues is None and read_queues is None and write_queues is None and perm is None:
        raise click.UsageError(
            "give at least one of --queues, --read-queues, --write-queues, --perm"
        )
    updated = run_admin(
        namesrv,
        lambda a: a.update_topic(
            name, queues=queues, read_queues=read_queues, write_queues=write_queues, perm=perm
        ),
    )
    rows = [
        {
            "broker": q.broker_name,
            "read_queues": q.read_queue_nums,
            "write_queues": q.write_queue_nums,
            "perm": q.perm if as_json else perm_text(q.perm),
        }
        for q in updated
    ]
    emit(rows, as_json=as_json, title=f"topic {name} updated")


@topic_group.command("delete")
@click.argument("name")
@admin_options
def topic_delete(name: str, namesrv: list[str], as_json: bool) -> None:
    """Delete topic NAME from its brokers and the name servers."""
    brokers = run_admin(namesrv, lambda a: a.delete_topic(name))
    emit({"topic": name, "deleted_from": brokers}, as_json=as_json, title=f"topic {name} deleted")


@topic_group.command("list")
@admin_options
def topic_list(namesrv: list[str], as_json: bool) -> None:
    """List every topic the name server knows."""
    topics = run_admin(namesrv, lambda a: a.all_topics())
    if as_json:
        emit(topics, as_json=True)
    elif topics:
        emit([{"topic": t} for t in topics], as_json=False, title=f"{len(topics)} topics")
    else:
        click.echo("no topics")


@topic_group.command("route")
@click.argument("name")
@admin_options
def topic_route(name: str, namesrv: list[str], as_json: bool) -> None:
    """Show which brokers serve topic NAME (the route clients get)."""
    route = run_admin(namesrv, lambda a: a.topic_route(name))
    if as_json:
        emit({"topic": name, **route.to_json()}, as_json=True)
        return
    rows = []
    for queue in route.queue_datas:
        broker = route.broker(queue.broker_name)
        rows.append(
            {
                "broker": queue.broker_name,
                "cluster": broker.cluster if broker else "",
                "master": (broker.master or "-") if broker else "-",
                "read_queues": queue.read_queue_nums,
                "write_queues": queue.write_queue_nums,
                "perm": perm_text(queue.perm),
            }
        )
    emit(rows, as_json=False, title=f"route of {name}")


@topic_group.command("status")
@click.argument("name")
@admin_options
def topic_status(name: str, namesrv: list[str], as_json: bool) -> None:
    """Min/max offset and last write time of every queue of topic NAME."""
    rows = run_admin(namesrv, lambda a: a.topic_status(name))
    data = [
        {
            "broker": r.broker_name,
            "queue": r.queue_id,
            "min_offset": r.min_offset,
            "max_offset": r.max_offset,
            ("last_update_timestamp" if as_json else "last_updated"): (
                r.last_update_timestamp if as_json else iso_time(r.last_update_timestamp)
            ),
        }
        for r in rows
    ]
    if not data and not as_json:
        click.echo(f"topic {name} has no queues")
        return
    emit(data, as_json=as_json, title=f"status of {name}")


# -- group ----------------------------------------------------------------------------


@click.group("group")
def group_group() -> None:
    """Create and list consumer (subscription) groups."""


@group_group.command("create")
@click.argument("name")
@click.option("--retry-max-times", type=click.IntRange(-1, 1000), default=16, show_default=True)
@click.option(
    "--broadcast/--no-broadcast",
    default=True,
    show_default=True,
    help="Allow broadcasting consumers.",
)
@click.option(
    "--orderly",
    "--fifo",
    "orderly",
    is_flag=True,
    help="FIFO (orderly) group: remoting orderly consumers, POP and gRPC deliver a message "
    "group's next message only after the previous one is acked.",
)
@click.option(
    "--broker-id",
    type=click.IntRange(0, None),
    default=0,
    show_default=True,
    help="Id of the broker (0: the master) a broker with slave_read_enable sends the "
    "group's consumers to (RocketMQ's brokerId).",
)
@click.option(
    "--which-broker-when-consume-slowly",
    type=click.IntRange(0, None),
    default=1,
    show_default=True,
    help="Id of the broker it sends them to when they are far behind "
    "(whichBrokerWhenConsumeSlowly).",
)
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True)
@click.option("--broker", "brokers", multiple=True, help="Only on this broker (repeatable).")
@admin_options
def group_create(
    name: str,
    retry_max_times: int,
    broadcast: bool,
    orderly: bool,
    broker_id: int,
    which_broker_when_consume_slowly: int,
    cluster: str,
    brokers: tuple[str, ...],
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Create consumer group NAME on every master broker of the cluster."""
    created = run_admin(
        namesrv,
        lambda a: a.create_group(
            name,
            retry_max_times=retry_max_times,
            broadcast=broadcast,
            orderly=orderly,
            broker_id=broker_id,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly,
            brokers=brokers or None,
            cluster=cluster,
        ),
    )
    emit(
        {"group": name, "brokers": created, "fifo": orderly},
        as_json=as_json,
        title=f"group {name} created",
    )


@group_group.command("list")
@click.option("--cluster", default=None, help="Only brokers of this cluster.")
@admin_options
def group_list(cluster: str | None, namesrv: list[str], as_json: bool) -> None:
    """List the consumer groups of every broker."""
    configs = run_admin(namesrv, lambda a: a.list_groups(cluster))
    merged: dict[str, dict[str, Any]] = {}
    for config in configs:
        row = merged.setdefault(
            config.group_name,
            {
                "group": config.group_name,
                "brokers": [],
                **config.settings(),
            },
        )
        row["brokers"].append(config.broker_name)
    rows = list(merged.values())
    if not rows and not as_json:
        click.echo("no groups")
        return
    if not as_json:
        rows = [{**r, "brokers": ", ".join(r["brokers"])} for r in rows]
    emit(rows, as_json=as_json, title=f"{len(rows)} groups")


# -- consumer --------------------------------------------------------------------------


@click.group("consumer")
def consumer_group() -> None:
    """Look at consumer groups' progress."""


def _progress_row(row: QueueProgress, as_json: bool) -> dict[str, Any]:
    return {
        "topic": row.topic,
        "broker": row.broker_name,
        "queue": row.queue_id,
        "broker_offset": row.broker_offset,
        "consumer_offset": row.consumer_offset,
        "lag": row.lag,
        ("last_timestamp" if as_json else "last_consumed"): (
            row.last_timestamp if as_json else iso_time(row.last_timestamp)
        ),
    }


@consumer_group.command("progress")
@click.argument("group")
@click.option("--topic", default=None, help="Only this topic.")
@admin_options
def consumer_progress(group: str, topic: str | None, namesrv: list[str], as_json: bool) -> None:
    """Per queue: broker offset, consumer offset and lag of GROUP; and the total lag."""
    rows = run_admin(namesrv, lambda a: a.consumer_progress(group, topic))
    if not rows:
        where = f" on topic {topic}" if topic else ""
        abort(f"group {group} has no consume progress{where} (no committed offsets)")
    total = sum(r.lag for r in rows)
    if as_json:
        emit(
            {"group": group, "queues": [_progress_row(r, True) for r in rows], "total_lag": total},
            as_json=True,
        )
        return
    emit([_progress_row(r, False) for r in rows], as_json=False, title=f"progress of {group}")
    click.echo(f"total lag: {total}")


# -- offsets ----------------------------------------------------------------------------


@click.group("offset")
def offset_group() -> None:
    """Change consumer offsets."""


@offset_group.command("reset")
@click.argument("group")
@click.argument("topic")
@click.option(
    "--timestamp",
    "timestamp",
    default=None,
    help="To the first message stored at or after this time: epoch milliseconds, 'now', "
    "or ISO-8601 (local time without a zone).",
)
@click.option(
    "--to",
    "target",
    default=None,
    metavar="earliest|latest|OFFSET",
    help="To the oldest message, to the end (skip everything stored), or to this queue "
    "offset (in every queue, or in --queue).",
)
@click.option(
    "--queue",
    "queue_id",
    type=click.IntRange(min=0),
    default=None,
    help="With --to OFFSET: only this queue id.",
)
@click.option("--broker", default=None, help="With --queue: only on this broker.")
@admin_options
def offset_reset(
    group: str,
    topic: str,
    timestamp: str | None,
    target: str | None,
    queue_id: int | None,
    broker: str | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Move GROUP's offsets on TOPIC: by time (--timestamp) or to a place (--to)."""
    if (timestamp is None) == (target is None):
        raise click.UsageError("give --timestamp or --to (earliest, latest or an offset)")
    offset = _offset_target(target)
    if offset is None and (queue_id is not None or broker is not None):
        raise click.UsageError("--queue and --broker go with --to OFFSET")
    if broker is not None and queue_id is None:
        raise click.UsageError("--broker goes with --queue")
    if offset is not None:
        rows = run_admin(
            namesrv,
            lambda a: a.reset_offset_to(group, topic, offset, queue_id=queue_id, broker=broker),
        )
        place = f"offset {offset}"
    else:
        when = _reset_time(timestamp, target)
        rows = run_admin(namesrv, lambda a: a.reset_offset(group, topic, when))
        place = target or (iso_time(when) if when > 0 else "the beginning")
    _show_reset(rows, f"{group} on {topic} reset to {place}", as_json)


def _offset_target(target: str | None) -> int | None:
    """The queue offset of `--to OFFSET`; None for earliest, latest or no --to."""
    if target is None or target.strip().lower() in ("earliest", "latest"):
        return None
    try:
        offset = int(target.strip())
    except ValueError:
        raise click.BadParameter(
            f"{target!r} is not earliest, latest or a queue offset", param_hint="--to"
        ) from None
    if offset < 0:
        raise click.BadParameter(f"a queue offset is >= 0, not {offset}", param_hint="--to")
    return offset


def _reset_time(timestamp: str | None, target: str | None) -> int:
    """The broker's reset time: 0 finds the earliest message, -1 the end (Java's Broker2Client)."""
    if target is not None:
        return 0 if target.strip().lower() == "earliest" else -1
    try:
        return parse_timestamp(timestamp or "")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--timestamp") from None


def _show_reset(rows: list[QueueOffset], title: str, as_json: bool) -> None:
    data = [{"broker": r.broker_name, "queue": r.queue_id, "offset": r.offset} for r in rows]
    if not data and not as_json:
        click.echo("no offsets were reset")
        return
    emit(data, as_json=as_json, title=title)


# -- cluster ----------------------------------------------------------------------------


@click.group("cluster")
def cluster_group() -> None:
    """Look at the clusters and brokers a name server knows; start, inspect and stop
    a whole cluster on this machine (up, status, down)."""


_RUNTIME_COLUMNS = (
    ("version", "brokerVersionDesc"),
    ("put_tps", "putTps"),
    ("get_tps", "getTransferedTps"),
)


def _disk_figures(runtime: dict[str, Any]) -> dict[str, Any]:
    """Disk use of the commitlog's partition (RocketMQ's commitLogDiskRatio),
    whether sends are refused for it, and the forced deletions since start."""

    def number(key: str, kind: type[int] | type[float]) -> int | float | None:
        try:
            return kind(runtime[key])
        except (KeyError, TypeError, ValueError):
            return None

    full = runtime.get("tidemqDiskFull")
    return {
        "disk_ratio": number("commitLogDiskRatio", float),
        "disk_full": None if full is None else full == "true",
        "forced_deleted_files": number("tidemqForcedDeletedFiles", int),
        "forced_deleted_messages": number("tidemqForcedDeletedMessages", int),
        "flush_trouble": runtime.get("tidemqFlushTrouble") or None,
    }


def _disk_column(figures: dict[str, Any]) -> str:
    ratio = figures["disk_ratio"]
    if ratio is None:
        return "-"
    flushing = " FLUSH FAILING" if figures["flush_trouble"] else ""
    return f"{ratio:.0%}" + (" FULL" if figures["disk_full"] else "") + flushing


def _forced_column(figures: dict[str, Any]) -> str:
    files, messages = figures["forced_deleted_files"], figures["forced_deleted_messages"]
    if files is None:
        return "-"
    return f"{files} files, {messages} msgs"


def _replication_figures(rows: list[dict[str, Any]]) -> None:
    """Each row's role (tidemqBrokerRole), and for a slave how many commitlog
    bytes it is behind its master (the master's commitLogMaxOffset minus its
    own), whether it is connected to the master's HA port, and whether it is
    in sync.

    In sync is RocketMQ's notion: a slave connected to its master and less
    than the master's haMaxGapNotInSync bytes behind it (4.x HAService.isSlaveOK:
    a connection and masterPutWhere - push2SlaveMaxOffset < haSlaveFallbehindMax;
    5.x DefaultHAService.isInSyncSlave, counted by inSyncReplicasNums). It is
    the rule a SYNC_MASTER applies before waiting for a slave (acks.slave_available):
    a slave out of sync gets its master's sends answered SLAVE_NOT_AVAILABLE.
    """
    masters: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["id"] == 0 and "commitLogMaxOffset" in row["runtime"]:
            masters[row["broker"]] = row["runtime"]
    for row in rows:
        runtime = row["runtime"]
        row["role"] = runtime.get("tidemqBrokerRole")
        row["lag_bytes"] = None
        row["ha_connected"] = None
        row["in_sync"] = None
        if row["id"] == 0 or "commitLogMaxOffset" not in runtime:
            continue
        connected = runtime.get("tidemqHaConnected")
        row["ha_connected"] = None if connected is None else connected == "true"
        master = masters.get(row["broker"])
        if master is None:
            row["in_sync"] = False
            continue
        master_end = int(master["commitLogMaxOffset"])
        slave_end = int(runtime["commitLogMaxOffset"])
        row["lag_bytes"] = max(0, master_end - slave_end)
        gap = master.get("tidemqHaMaxGapNotInSync")
        if gap is not None:
            reporting = 1 if row["ha_connected"] else 0
            row["in_sync"] = slave_available(reporting, master_end, slave_end, int(gap))


def _replication_column(row: dict[str, Any]) -> str:
    if row["id"] == 0:
        slaves = row["runtime"].get("tidemqHaSlaves")
        return "-" if slaves in (None, "0") else f"{slaves} slave(s)"
    lag = row["lag_bytes"]
    shown = "-" if lag is None else f"{lag} bytes behind"
    if row["ha_connected"] is False:
        shown += ", not connected"
    if row["in_sync"] is not None:
        shown += ", in sync" if row["in_sync"] else ", NOT in sync"
    return shown


@cluster_group.command("list")
@admin_options
def cluster_list(namesrv: list[str], as_json: bool) -> None:
    """Every cluster, broker and address, with the brokers' runtime figures:
    role (master or slave) and, for a slave, how far behind its master it is
    and whether it is in sync (connected and within ha_max_gap_not_in_sync);
    disk use of the commitlog's disk (FULL: sends refused) and messages deleted
    by forced retention since the broker started."""

    async def gather(admin: AdminClient) -> list[dict[str, Any]]:
        info = await admin.cluster_info()
        rows: list[dict[str, Any]] = []
        for cluster, names in info.clusters.items():
            for name in names:
                broker = info.brokers.get(name)
                for broker_id, address in sorted((broker.addrs if broker else {}).items()):
                    try:
                        runtime = await admin.broker_runtime_stats(address)
                    except AdminError as exc:
                        runtime = {"error": exc.message}
                    rows.append(
                        {
                            "cluster": cluster,
                            "broker": name,
                            "id": broker_id,
                            "address": address,
                            **_disk_figures(runtime),
                            "runtime": runtime,
                        }
                    )
        return rows

    rows = run_admin(namesrv, gather)
    _replication_figures(rows)
    if as_json:
        emit(rows, as_json=True)
        return
    if not rows:
        click.echo("no brokers registered")
        return
    table = []
    for row in rows:
        runtime = row["runtime"]
        entry = {k: row[k] for k in ("cluster", "broker", "id", "address")}
        entry["role"] = row["role"] or "-"
        entry["replication"] = _replication_column(row)
        for column, key in _RUNTIME_COLUMNS:
            entry[column] = runtime.get(key, "-")
        entry["disk"] = _disk_column(row)
        entry["forced_deleted"] = _forced_column(row)
        if "error" in runtime:
            entry["version"] = f"unreachable: {runtime['error']}"
        table.append(entry)
    emit(table, as_json=False, title="clusters")


ADMIN_COMMANDS: tuple[click.Command, ...] = (
    topic_group,
    group_group,
    consumer_group,
    offset_group,
    cluster_group,
)
"""Everything this module adds to the `tidemq` group."""

__all__ = ["ADMIN_COMMANDS", "cluster_group", "consumer_group", "group_group", "topic_change"]
