"""The `tidemq` command."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import click

from tidemq.cli.admin_commands import ADMIN_COMMANDS, cluster_group, consumer_group, group_group
from tidemq.cli.auth_commands import AUTH_COMMANDS
from tidemq.cli.broker_config_commands import broker_config
from tidemq.cli.cert_command import cert
from tidemq.cli.cluster_commands import LOCAL_CLUSTER_COMMANDS
from tidemq.cli.connection_commands import (
    consumer_connection,
    consumer_status,
    group_delete,
    producer_group,
)
from tidemq.cli.dead_letter_commands import (
    consumer_consume_directly,
    consumer_dead_letters,
    consumer_resend,
)
from tidemq.cli.message_commands import MESSAGE_COMMANDS
from tidemq.cli.output import JsonReported, json_reported
from tidemq.cli.server_commands import SERVER_COMMANDS
from tidemq.cli.store_commands import store_group
from tidemq.cli.write_perm_commands import WRITE_PERM_COMMANDS
from tidemq.common.version import __version__


def wants_json(args: Sequence[str]) -> bool:
    """True when `--json` is among the options (before any `--`)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


class JsonErrors(click.Group):
    """A group whose commands, given `--json`, report any failure (a server's
    refusal or a bad argument) as one JSON object on stdout, with the same
    exit code, so that programs never have to parse an English line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        as_json = wants_json(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise (json_reported(exc) if as_json else exc) from None
        ctx.meta["tidemq.json_errors"] = as_json
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except JsonReported:
            raise
        except click.ClickException as exc:
            if ctx.meta.get("tidemq.json_errors"):
                raise json_reported(exc) from None
            raise


@click.group(cls=JsonErrors)
@click.version_option(__version__, prog_name="tidemq")
@click.option("-v", "--verbose", is_flag=True, help="Log what the servers and store do.")
def cli(verbose: bool) -> None:
    """tidemq: a RocketMQ-compatible message queue written in Python."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


for command in (
    *SERVER_COMMANDS,
    cert,
    *ADMIN_COMMANDS,
    *AUTH_COMMANDS,
    *MESSAGE_COMMANDS,
    store_group,
    producer_group,
):
    cli.add_command(command)
for command in (*LOCAL_CLUSTER_COMMANDS, *WRITE_PERM_COMMANDS, broker_config):
    cluster_group.add_command(command)
consumer_group.add_command(consumer_connection)
consumer_group.add_command(consumer_status)
consumer_group.add_command(consumer_dead_letters)
consumer_group.add_command(consumer_resend)
consumer_group.add_command(consumer_consume_directly)
group_group.add_command(group_delete)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
