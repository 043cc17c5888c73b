"""`tidemq consumer dead-letters GROUP`, `tidemq consumer resend GROUP MSG_ID...` and
`tidemq consumer consume-directly GROUP MSG_ID`: the messages a group gave up on,
giving them back to it, and trying one on a consumer now (the dashboard's dead
letter page and mqadmin consumeMessage, from the command line)."""

from __future__ import annotations

from typing import Any

import click

from tidemq.cli.message_commands import message_json, message_line
from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort, admin_options, run_admin
from tidemq.client.admin import AdminClient, AdminError

__all__ = ["consumer_consume_directly", "consumer_dead_letters", "consumer_resend"]


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


@click.command("consume-directly")
@click.argument("group")
@click.argument("msg_id")
@click.option("--topic", default=None, help="The message's topic (needed for a client msg_id).")
@click.option("--client", "client_id", default=None, help="This client id (default: the first).")
@admin_options
def consumer_consume_directly(
    group: str,
    msg_id: str,
    topic: str | None,
    client_id: str | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Have an online consumer of GROUP run its listener over message MSG_ID now, and
    say how it went (mqadmin consumeMessage; CR_SUCCESS, CR_LATER,
    CR_THROW_EXCEPTION with the error, CR_RETURN_NULL). Its offsets and retries are
    left alone: a way to try a fix on one message."""
    asked, result = run_admin(
        namesrv,
        lambda a: a.consume_directly(group, msg_id, topic=topic, client_id=client_id),
        failing=f"cannot have {group} consume {msg_id}",
    )
    if as_json:
        emit({"client_id": asked, **result}, as_json=True)
    else:
        remark = f" ({result['remark']})" if result.get("remark") else ""
        click.echo(
            f"{asked}: {result.get('consumeResult')}{remark} in {result.get('spentTimeMills')} ms"
        )
    if result.get("consumeResult") != "CR_SUCCESS":
        raise SystemExit(1)


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
