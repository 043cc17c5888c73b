"""The `tidemq` command."""

from __future__ import annotations

import logging

import click

from tidemq import __version__
from tidemq.cli.admin_commands import ADMIN_COMMANDS
from tidemq.cli.cert_command import cert
from tidemq.cli.server_commands import SERVER_COMMANDS
from tidemq.cli.store_commands import store_group


@click.group()
@click.version_option(__version__, prog_name="tidemq")
@click.option("-v", "--verbose", is_flag=True, help="Log what the servers and store do.")
def cli(verbose: bool) -> None:
    """tidemq: a RocketMQ-compatible message queue written in Python."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


for command in (*SERVER_COMMANDS, cert, *ADMIN_COMMANDS, store_group):
    cli.add_command(command)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
