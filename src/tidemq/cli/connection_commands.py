"""Who is connected, and removing a group: `tidemq consumer connection`,
`tidemq producer connection` and `tidemq group delete` (mqadmin
consumerConnection, producerConnection and deleteSubGroup)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort, admin_options, run_admin
from tidemq.client.admin import DEFAULT_CLUSTER, AdminClient, AdminError, ClientConnection

__all__ = ["consumer_connection", "consumer_status", "group_delete", "producer_group"]


def _connection_rows(connections: Sequence[ClientConnection]) -> list[dict[str, Any]]:
    return [
        {
            "client_id": c.client_id,
            "address": c.address,
            "language": c.language,
            "version": c.version,
            "broker": c.broker_name,
        }
        for c in connections
    ]


@click.command("connection")
@click.argument("group")
@admin_options
def consumer_connection(group: str, namesrv: list[str], as_json: bool) -> None:
    """The online consumers of GROUP (client id, address, language, version),
    what they subscribe, and how they consume; exit 1 when none is online."""
    connection = run_admin(namesrv, lambda a: a.consumer_connection(group))
    if not connection.connections:
        abort(f"no consumer of group {group} is online")
    if as_json:
        emit({"group": group, **connection.to_json()}, as_json=True)
        return
    document = connection.to_json()
    emit(document["connections"], as_json=False, title=f"consumers of {group}")
    emit(document["subscriptions"], as_json=False, title="subscriptions")
    click.echo(
        f"consume type: {connection.consume_type}, message model: {connection.message_model}, "
        f"consume from: {connection.consume_from_where}"
    )


def _error_json(error: AdminError) -> dict[str, Any]:
    return {"error": error.message, "code": error.code}


@click.command("status")
@click.argument("group")
@click.option("--client", "client_id", default=None, help="Only this client id.")
@admin_options
def consumer_status(group: str, client_id: str | None, namesrv: list[str], as_json: bool) -> None:
    """What each online consumer of GROUP says of itself (mqadmin consumerStatus):
    its settings, subscriptions and, per queue it holds, the committed offset and
    the messages it has fetched but not yet consumed. Exit 1 when none is online or
    one cannot answer."""
    answers = run_admin(namesrv, lambda a: a.consumer_running_info(group, client_id))
    if not answers:
        who = f"client {client_id} of group {group}" if client_id else f"consumer of group {group}"
        abort(f"no {who} is online")
    failed = {cid: info for cid, info in answers.items() if isinstance(info, AdminError)}
    if as_json:
        clients = {
            cid: {"error": info.message, "code": info.code}
            if isinstance(info, AdminError)
            else info
            for cid, info in answers.items()
        }
        emit({"group": group, "clients": clients}, as_json=True)
    else:
        for cid, info in answers.items():
            if isinstance(info, AdminError):
                click.echo(f"client {cid}: FAILED: {info.message}")
                continue
            emit(info.get("properties") or {}, as_json=False, title=f"client {cid}")
            queues = [{"queue": key, **value} for key, value in (info.get("mqTable") or {}).items()]
            if queues:
                emit(queues, as_json=False, title="queues it holds")
    if failed:
        cid, error = next(iter(failed.items()))
        abort(f"client {cid} did not answer: {error.message}", error.code)


@click.group("producer")
def producer_group() -> None:
    """Look at producer groups."""


@producer_group.command("connection")
@click.argument("group")
@admin_options
def producer_connection(group: str, namesrv: list[str], as_json: bool) -> None:
    """The online producers of GROUP (client id, address, language, version);
    exit 1 when none is online."""
    connections = run_admin(namesrv, lambda a: a.producer_connection(group))
    if not connections:
        abort(f"no producer of group {group} is online")
    rows = _connection_rows(connections)
    if as_json:
        emit({"group": group, "connections": rows}, as_json=True)
        return
    emit(rows, as_json=False, title=f"producers of {group}")


@click.command("delete")
@click.argument("name")
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True)
@click.option("--broker", "brokers", multiple=True, help="Only on this broker (repeatable).")
@click.option(
    "--clean-offset",
    is_flag=True,
    help="Delete the group's committed offsets too (mqadmin deleteSubGroup -r true).",
)
@click.option(
    "--keep-topics",
    is_flag=True,
    help="Keep the group's %RETRY% and %DLQ% topics (deleted otherwise, as mqadmin "
    "deleteSubGroup -c does; only without --broker).",
)
@admin_options
def group_delete(
    name: str,
    cluster: str,
    brokers: tuple[str, ...],
    clean_offset: bool,
    keep_topics: bool,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Delete consumer group NAME on every master broker of the cluster (or on
    --broker), and its retry and dead-letter topics (--keep-topics keeps them,
    with their dead letters). Consumers still online make the group again at
    their next heartbeat (auto_create_subscription_group): stop them first."""

    async def delete(admin: AdminClient) -> dict[str, Any]:
        online = len((await admin.consumer_connection(name)).connections)
        deleted = await admin.delete_group(
            name, clean_offset=clean_offset, brokers=brokers or None, cluster=cluster
        )
        topics: list[str] = []
        if not brokers and not keep_topics:
            for topic in (f"%RETRY%{name}", f"%DLQ%{name}"):
                try:
                    await admin.delete_topic(topic)
                except AdminError:
                    continue  # never made (no retry, no dead letter yet)
                topics.append(topic)
        return {
            "group": name,
            "brokers": deleted,
            "offsets_deleted": clean_offset,
            "topics_deleted": topics,
            "consumers_online": online,
        }

    result = run_admin(namesrv, delete, failing=f"cannot delete group {name}")
    if as_json:
        emit(result, as_json=True)
        return
    click.echo(f"deleted group {name} on {', '.join(result['brokers'])}")
    if clean_offset:
        click.echo("its committed offsets are deleted too")
    if result["topics_deleted"]:
        click.echo(f"deleted topics: {', '.join(result['topics_deleted'])}")
    if result["consumers_online"]:
        click.echo(
            f"warning: {result['consumers_online']} consumer(s) of {name} are still online; "
            "the group is made again at their next heartbeat"
        )
