"""`tidemq consumer dead-letters GROUP` and `tidemq consumer resend GROUP MSG_ID...`:
the messages a group gave up on, and giving them back to it (the dashboard's dead
letter page, from the command line)."""

from __future__ import annotations

from typing import Any

import click

from tidemq.cli.message_commands import message_json, message_line
from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort, admin_options, run_admin
from tidemq.client.admin import AdminClient, AdminError

__all__ = ["consumer_dead_letters", "consumer_resend"]


@click.command("dead-letters")
@click.argument("group")
@click.option("--max", "max_num", type=click.IntRange(1, 10_000), default=64, show_default=True)
@admin_options
def consumer_dead_letters(group: str, max_num: int, namesrv: list[str], as_json: bool) -> None:
    """The dead letters of GROUP (its %DLQ% topic), oldest first: each with the
    topic it came from and how many times it was consumed."""
    found = run_admin(namesrv, lambda a: a.dead_letters(group, max_num))
    if as_json:
        rows = [
            {**message_json(m), "origin_topic": m.properties.get("RETRY_TOPIC")}
            for m in found.messages
        ]
        emit({"group": group, "messages": rows, "cut": found.cut}, as_json=True)
        return
    if not found.messages:
        click.echo(f"group {group} has no dead letters")
        return
    for message in found.messages:
        origin = message.properties.get("RETRY_TOPIC") or "?"
        click.echo(
            f"{message_line(message, stored=True)}  from={origin}  "
            f"consumed={message.reconsume_times}"
        )
    if found.cut:
        click.echo(f"(more than {max_num}: --max shows more)")


@click.command("resend")
@click.argument("group")
@click.argument("msg_ids", nargs=-1, required=True)
@admin_options
def consumer_resend(
    group: str, msg_ids: tuple[str, ...], namesrv: list[str], as_json: bool
) -> None:
    """Give dead letters MSG_ID... of GROUP back to it: a copy of each goes to the
    group's retry topic, due now, with a fresh retry budget; the dead letter stays."""

    async def resend(admin: AdminClient) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for msg_id in msg_ids:
            try:
                result = await admin.resend_dead_letter(group, msg_id)
            except AdminError as exc:
                rows.append({"msg_id": msg_id, "resent_as": None, "error": exc.message})
                continue
            rows.append({"msg_id": msg_id, "resent_as": result.msg_id, "error": None})
        return rows

    rows = run_admin(namesrv, resend)
    if as_json:
        emit(rows, as_json=True)
    else:
        for row in rows:
            if row["error"] is None:
                click.echo(f"{row['msg_id']}: resent to group {group} as {row['resent_as']}")
            else:
                click.echo(f"{row['msg_id']}: FAILED: {row['error']}")
    failed = [row for row in rows if row["error"] is not None]
    if failed:
        abort(f"{len(failed)} of {len(rows)} not resent: {failed[0]['error']}")
