"""`tidemq cluster wipe-write-perm` and `add-write-perm`: take a broker out of the
producers' choice while its consumers drain it, and put it back (mqadmin
wipeWritePerm / addWritePerm, with the same requests to each name server)."""

from __future__ import annotations

from typing import Any

import click

from tidemq.cli.output import emit
from tidemq.cli.plumbing import abort, abort_unknown_broker, admin_options, run_admin
from tidemq.client.admin import AdminClient, AdminError

__all__ = ["WRITE_PERM_COMMANDS"]


def _set_everywhere(broker: str, namesrv: list[str], as_json: bool, *, writable: bool) -> None:
    async def each(admin: AdminClient) -> tuple[list[str], list[dict[str, Any]]]:
        known = sorted((await admin.cluster_info()).brokers)
        if broker not in known:
            return known, []
        rows: list[dict[str, Any]] = []
        for address in admin.namesrv:
            try:
                topics = await admin.set_write_perm(address, broker, writable=writable)
            except AdminError as exc:
                rows.append({"namesrv": address, "broker": broker, "ok": False,
                             "topics": None, "error": exc.message})  # fmt: skip
                continue
            rows.append({"namesrv": address, "broker": broker, "ok": True,
                         "topics": topics, "error": None})  # fmt: skip
        return known, rows

    known, rows = run_admin(namesrv, each)
    if not rows:
        abort_unknown_broker(broker, known)
    if as_json:
        emit(rows, as_json=True)
    else:
        done = "writable again" if writable else "no longer offered for writes"
        for row in rows:
            if row["ok"]:
                click.echo(
                    f"{broker} at name server {row['namesrv']}: {done} ({row['topics']} topics)"
                )
            else:
                click.echo(f"{broker} at name server {row['namesrv']}: FAILED: {row['error']}")
        if not writable and all(row["ok"] for row in rows):
            click.echo(
                "producers stop choosing it once they refresh its routes (30 s by default); "
                "consumers go on reading it"
            )
    failed = [row["namesrv"] for row in rows if not row["ok"]]
    if failed:
        abort(f"not changed at name server(s) {', '.join(failed)}")


@click.command("wipe-write-perm")
@click.argument("broker")
@admin_options
def wipe_write_perm(broker: str, namesrv: list[str], as_json: bool) -> None:
    """Stop offering broker group BROKER to producers (its topics lose the write
    permission in every name server's routes) while consumers drain it; it
    lasts until `add-write-perm`, or until its master restarts."""
    _set_everywhere(broker, namesrv, as_json, writable=False)


@click.command("add-write-perm")
@click.argument("broker")
@admin_options
def add_write_perm(broker: str, namesrv: list[str], as_json: bool) -> None:
    """Offer broker group BROKER to producers again, with each topic's own permission."""
    _set_everywhere(broker, namesrv, as_json, writable=True)


WRITE_PERM_COMMANDS: tuple[click.Command, ...] = (wipe_write_perm, add_write_perm)
"""Subcommands of `tidemq cluster`."""
