"""`tidemq cluster broker-config BROKER [--set KEY=VALUE]`: a broker's settings, and
changing brokerPermission while it runs (mqadmin getBrokerConfig / updateBrokerConfig,
on the master and every slave of the broker name)."""

from __future__ import annotations

from typing import Any

import click

from tidemq.cli.output import emit
from tidemq.cli.plumbing import (
    abort,
    abort_unknown_broker,
    admin_options,
    parse_properties,
    run_admin,
)
from tidemq.client.admin import AdminClient, AdminError

__all__ = ["broker_config"]


@click.command("broker-config")
@click.argument("broker")
@click.option(
    "--set",
    "items",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a setting on the master and its slaves while they run (tidemq changes "
    "brokerPermission: 6 read and write, 4 read only, 2 write only, 0 nothing; it lasts "
    "until the broker restarts).",
)
@admin_options
def broker_config(broker: str, items: tuple[str, ...], namesrv: list[str], as_json: bool) -> None:
    """Show the settings of broker BROKER (each of its nodes), or change them with --set.
    `--set brokerPermission=4` takes it out of the producers' routes while consumers
    drain it, on both protocols; `--set brokerPermission=6` puts it back."""
    settings = {k: v.strip() for k, v in parse_properties(items, "--set").items()}

    async def each(admin: AdminClient) -> tuple[list[str], list[dict[str, Any]]]:
        info = await admin.cluster_info()
        data = info.brokers.get(broker)
        if data is None:
            return sorted(info.brokers), []
        rows: list[dict[str, Any]] = []
        for broker_id, address in sorted(data.addrs.items()):
            row: dict[str, Any] = {"broker": broker, "id": broker_id, "address": address}
            try:
                if settings:
                    await admin.update_broker_config(address, settings)
                    row["changed"] = settings
                else:
                    row["config"] = await admin.broker_config(address)
                row["error"] = None
            except AdminError as exc:
                row["error"] = exc.message
            rows.append(row)
        return sorted(info.brokers), rows

    known, rows = run_admin(namesrv, each)
    if not rows:
        abort_unknown_broker(broker, known)
    if as_json:
        emit(rows, as_json=True)
    else:
        for row in rows:
            where = f"{broker} id {row['id']} at {row['address']}"
            if row["error"] is not None:
                click.echo(f"{where}: FAILED: {row['error']}")
            elif settings:
                shown = ", ".join(f"{k}={v}" for k, v in settings.items())
                click.echo(f"{where}: {shown}")
            else:
                emit(row["config"], as_json=False, title=where)
    failed = [row for row in rows if row["error"] is not None]
    if failed:
        first = failed[0]["error"]
        abort(f"not done at {', '.join(row['address'] for row in failed)}: {first}")
