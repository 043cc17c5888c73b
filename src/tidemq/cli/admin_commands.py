"""Admin and client commands: `tidemq topic|group|consumer|message|offset|cluster ...`,
`tidemq send` and `tidemq consume`, all over tidemq.client.admin.AdminClient.

Every command takes `--namesrv HOST:PORT[;HOST:PORT]` (env TIDEMQ_NAMESRV) and
`--json`; people get rich tables, programs JSON. Any failure ends with a
one-line message and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import click

from tidemq.cli.output import emit, errors, fail
from tidemq.client.admin import (
    DEFAULT_CLUSTER,
    AdminClient,
    AdminError,
    QueueProgress,
    parse_address_list,
)
from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.common.message import MessageExt
from tidemq.protocol import ProtocolError

DEFAULT_NAMESRV = "127.0.0.1:9876"

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


# -- shared options and plumbing ------------------------------------------------------


def _check_namesrv(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    try:
        return parse_address_list(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def admin_options(command: F) -> F:
    """--namesrv and --json, on every command that talks to a cluster."""
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(
        command
    )
    return click.option(
        "--namesrv",
        default=DEFAULT_NAMESRV,
        envvar="TIDEMQ_NAMESRV",
        show_default=True,
        show_envvar=True,
        callback=_check_namesrv,
        help="Name server address(es), HOST:PORT[;HOST:PORT].",
    )(command)


def _abort(message: str) -> NoReturn:
    fail(" ".join(message.split()))
    raise click.ClickException(message)  # fail() always raises; this satisfies the checker


def run_admin(namesrv: Sequence[str], action: Callable[[AdminClient], Awaitable[T]]) -> T:
    """Run `action` with a connected AdminClient; any AdminError becomes a clean exit."""

    async def main() -> T:
        async with AdminClient(namesrv) as admin:
            return await action(admin)

    try:
        return asyncio.run(main())
    except AdminError as exc:
        _abort(exc.message)
    except ProtocolError as exc:  # a malformed answer the client did not expect
        _abort(f"malformed response: {exc}")


def _iso(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from "1700000000000", "now" or ISO-8601 (local time if no zone)."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    if value.lower() == "now":
        return SYSTEM_CLOCK.now_ms()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time "
            "(e.g. 2024-05-01T12:00:00+02:00)"
        ) from None
    return round(moment.timestamp() * 1000)


def parse_properties(items: Sequence[str]) -> dict[str, str]:
    """k=v pairs of --property into a dict."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--property takes KEY=VALUE, got {item!r}")
        result[key.strip()] = value
    return result


def message_json(message: MessageExt) -> dict[str, Any]:
    """A stored message for people and programs (body as text, or base64 if not UTF-8)."""
    data: dict[str, Any] = {
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "msg_id": message.unique_key or message.msg_id,
        "offset_msg_id": message.msg_id,
        "tags": message.tags,
        "keys": message.keys,
        "properties": dict(message.properties),
        "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp,
        "born_host": message.born_host,
        "store_host": message.store_host,
        "reconsume_times": message.reconsume_times,
        "body_size": len(message.body),
    }
    try:
        data["body"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        data["body"] = None
        data["body_base64"] = base64.b64encode(message.body).decode("ascii")
    return data


def _message_line(message: MessageExt) -> str:
    data = message_json(message)
    body = data["body"] if data["body"] is not None else f"<{data['body_size']} bytes>"
    parts = [
        f"{message.topic}/{message.queue_id}@{message.queue_offset}",
        f"id={data['msg_id']}",
    ]
    if message.tags:
        parts.append(f"tags={message.tags}")
    if message.keys:
        parts.append(f"keys={','.join(message.keys)}")
    parts.append(f"body={json.dumps(body, ensure_ascii=False)}")
    return "  ".join(parts)


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
    help="Accept only this message type (RocketMQ 5's message.type attribute); default: any type.",
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
    """Create topic NAME on every master broker of the cluster."""
    try:
        attrs = parse_properties(attributes) if attributes else None
    except ValueError as exc:
        raise click.BadParameter(str(exc).replace("--property", "--attribute")) from None
    if message_type is not None:
        attrs = dict(attrs or {})
        attrs["+message.type"] = message_type.upper()
    created = run_admin(
        namesrv,
        lambda a: a.create_topic(
            name,
            queues=queues,
            perm=perm,
            brokers=brokers or None,
            cluster=cluster,
            attributes=attrs,
        ),
    )
    emit(
        {
            "topic": name,
            "brokers": created,
            "queues": queues,
            "perm": perm,
            "type": message_type.upper() if message_type else None,
        },
        as_json=as_json,
        title=f"topic {name} created",
    )


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
            "perm": q.perm,
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
                "perm": queue.perm,
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
                r.last_update_timestamp if as_json else _iso(r.last_update_timestamp)
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
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True)
@click.option("--broker", "brokers", multiple=True, help="Only on this broker (repeatable).")
@admin_options
def group_create(
    name: str,
    retry_max_times: int,
    broadcast: bool,
    orderly: bool,
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
                "consume_enable": config.config.get("consumeEnable"),
                "broadcast": config.config.get("consumeBroadcastEnable"),
                "orderly": config.config.get("consumeMessageOrderly"),
                "retry_max_times": config.config.get("retryMaxTimes"),
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
            row.last_timestamp if as_json else _iso(row.last_timestamp)
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
        _abort(f"group {group} has no consume progress{where} (no committed offsets)")
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
    required=True,
    help="Epoch milliseconds, 'now', or ISO-8601 (local time without a zone).",
)
@admin_options
def offset_reset(group: str, topic: str, timestamp: str, namesrv: list[str], as_json: bool) -> None:
    """Move GROUP's offsets on TOPIC to the first message stored at or after --timestamp."""
    try:
        when = parse_timestamp(timestamp)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--timestamp") from None
    rows = run_admin(namesrv, lambda a: a.reset_offset(group, topic, when))
    data = [{"broker": r.broker_name, "queue": r.queue_id, "offset": r.offset} for r in rows]
    if not data and not as_json:
        click.echo("no offsets were reset")
        return
    since = _iso(when) if when > 0 else "the beginning"
    emit(data, as_json=as_json, title=f"{group} on {topic} reset to {since}")


# -- cluster ----------------------------------------------------------------------------


@click.group("cluster")
def cluster_group() -> None:
    """Look at the clusters and brokers a name server knows."""


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


@cluster_group.command("list")
@admin_options
def cluster_list(namesrv: list[str], as_json: bool) -> None:
    """Every cluster, broker and address, with the brokers' runtime figures:
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
        for column, key in _RUNTIME_COLUMNS:
            entry[column] = runtime.get(key, "-")
        entry["disk"] = _disk_column(row)
        entry["forced_deleted"] = _forced_column(row)
        if "error" in runtime:
            entry["version"] = f"unreachable: {runtime['error']}"
        table.append(entry)
    emit(table, as_json=False, title="clusters")


# -- messages ----------------------------------------------------------------------------


@click.command("send")
@click.argument("topic")
@click.argument("body")
@click.option("--tags", default=None, help="The message tag.")
@click.option("--keys", default=None, help="Space-separated keys (indexed for lookups).")
@click.option("--property", "properties", multiple=True, help="User property KEY=VALUE.")
@click.option("--count", type=click.IntRange(1, 1_000_000), default=1, show_default=True)
@click.option(
    "--deliver-at",
    default=None,
    help="Timer message: deliver at this time (epoch ms or ISO-8601; local time if no zone).",
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=None,
    help="Timer message: deliver this many seconds after the broker receives it.",
)
@admin_options
def send(
    topic: str,
    body: str,
    tags: str | None,
    keys: str | None,
    properties: tuple[str, ...],
    count: int,
    deliver_at: str | None,
    delay: float | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Send BODY to TOPIC (BODY "-" reads standard input); prints id, queue and offset,
    and for a timer message its recall handle (for `tidemq recall`)."""
    try:
        user_properties = parse_properties(properties)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--property") from None
    deliver_at_ms = None
    if deliver_at is not None:
        if delay is not None:
            raise click.BadParameter("give --deliver-at or --delay, not both")
        try:
            deliver_at_ms = parse_timestamp(deliver_at)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--deliver-at") from None
    payload = sys.stdin.buffer.read() if body == "-" else body.encode("utf-8")

    async def send_all(admin: AdminClient) -> list[dict[str, Any]]:
        rows = []
        for _ in range(count):
            try:
                result = await admin.send(
                    topic,
                    payload,
                    tags,
                    keys,
                    user_properties,
                    deliver_at=deliver_at_ms,
                    deliver_after=delay,
                )
            except ValueError as exc:
                raise AdminError(str(exc), 13) from None
            row: dict[str, Any] = {
                "msg_id": result.msg_id,
                "offset_msg_id": result.offset_msg_id,
                "broker": result.broker_name,
                "queue": result.queue_id,
                "queue_offset": result.queue_offset,
                "status": result.status,
            }
            if result.recall_handle is not None:
                row["recall_handle"] = result.recall_handle
            rows.append(row)
        return rows

    rows = run_admin(namesrv, send_all)
    if as_json:
        emit(rows, as_json=True)
        return
    # Plain lines rather than a table, so the ids are never cut at the terminal's width.
    for row in rows:
        handle = f"  recall_handle={row['recall_handle']}" if "recall_handle" in row else ""
        click.echo(
            f"{row['status']}  msg_id={row['msg_id']}  offset_msg_id={row['offset_msg_id']}  "
            f"queue={row['broker']}/{row['queue']}  queue_offset={row['queue_offset']}{handle}"
        )


@click.command("recall")
@click.argument("topic")
@click.argument("handle")
@admin_options
def recall(topic: str, handle: str, namesrv: list[str], as_json: bool) -> None:
    """Cancel a timer message of TOPIC before it is due (HANDLE: from `tidemq send`)."""
    msg_id = run_admin(namesrv, lambda admin: admin.recall(topic, handle))
    if as_json:
        emit({"topic": topic, "msg_id": msg_id, "recalled": True}, as_json=True)
    else:
        click.echo(f"recalled msg_id={msg_id} of {topic}")


@click.command("consume")
@click.argument("topic")
@click.option(
    "--tags", "tags", default="*", show_default=True, help="Tag filter, e.g. 'TagA || TagB'."
)
@click.option("--sql", default=None, help="SQL92 filter on properties (instead of --tags).")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest message.")
@click.option(
    "--group",
    default=None,
    help="Consume as this group: start at its offsets, commit what was printed.",
)
@click.option(
    "--max",
    "max_messages",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many messages.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without a message.",
)
@admin_options
def consume(
    topic: str,
    tags: str,
    sql: str | None,
    from_beginning: bool,
    group: str | None,
    max_messages: int | None,
    timeout: float | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Print messages of TOPIC as they arrive (one line each; JSON lines with --json)."""
    if sql is not None and tags.strip() not in ("", "*"):
        raise click.UsageError("give --tags or --sql, not both")

    async def tail(admin: AdminClient) -> int:
        count = 0
        messages = admin.tail(
            topic,
            tags,
            from_beginning=from_beginning,
            sql=sql,
            group=group,
            idle_timeout=timeout,
        )
        async with contextlib.aclosing(messages):
            async for message in messages:
                if as_json:
                    line = json.dumps(message_json(message), sort_keys=True, ensure_ascii=False)
                else:
                    line = _message_line(message)
                click.echo(line)
                sys.stdout.flush()
                count += 1
                if max_messages is not None and count >= max_messages:
                    break
        return count

    try:
        count = run_admin(namesrv, tail)
    except KeyboardInterrupt:
        return
    if not as_json:
        errors.print(f"{count} message{'s' if count != 1 else ''}", highlight=False)


@click.group("message")
def message_group() -> None:
    """Look messages up."""


@message_group.command("query")
@click.option("--topic", default=None, help="The topic (needed with --key).")
@click.option("--key", default=None, help="A message key (KEYS).")
@click.option(
    "--id",
    "msg_id",
    default=None,
    help="A message id: the broker's offset id, or the client id with --topic.",
)
@click.option("--max", "max_num", type=click.IntRange(1, 64 * 1024), default=64, show_default=True)
@admin_options
def message_query(
    topic: str | None,
    key: str | None,
    msg_id: str | None,
    max_num: int,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Find messages by key (--topic T --key K) or by id (--id MSGID)."""
    if (key is None) == (msg_id is None):
        raise click.UsageError("give either --key (with --topic) or --id")
    if key is not None:
        if topic is None:
            raise click.UsageError("--key needs --topic")
        found_topic = topic
        messages = run_admin(namesrv, lambda a: a.query_by_key(found_topic, key, max_num))
        if not messages:
            _abort(f"no message with key {key} in topic {topic}")
        if as_json:
            emit([message_json(m) for m in messages], as_json=True)
            return
        rows = [
            {
                "msg_id": m.unique_key or m.msg_id,
                "offset_msg_id": m.msg_id,
                "queue": m.queue_id,
                "offset": m.queue_offset,
                "tags": m.tags or "",
                "keys": " ".join(m.keys),
                "stored": _iso(m.store_timestamp),
                "body": _preview(m.body),
            }
            for m in messages
        ]
        emit(rows, as_json=False, title=f"messages with key {key}")
        return
    if msg_id is None:  # unreachable after the checks above; narrows the type
        raise click.UsageError("give either --key (with --topic) or --id")
    message = run_admin(namesrv, lambda a: a.message_by_id(msg_id, topic))
    data = message_json(message)
    if not as_json:
        data["born_timestamp"] = _iso(message.born_timestamp)
        data["store_timestamp"] = _iso(message.store_timestamp)
        data = {k: "-" if v is None else v for k, v in data.items()}
    emit(data, as_json=as_json, title=f"message {msg_id}")


def _preview(body: bytes, limit: int = 60) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


ADMIN_COMMANDS: tuple[click.Command, ...] = (
    topic_group,
    group_group,
    consumer_group,
    offset_group,
    message_group,
    cluster_group,
    send,
    recall,
    consume,
)
"""Everything this module adds to the `tidemq` group."""

__all__ = ["ADMIN_COMMANDS", "message_json", "parse_properties", "parse_timestamp"]
