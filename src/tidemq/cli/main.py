"""The `tidemq` command."""

from __future__ import annotations

import logging

import click

from tidemq import __version__
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


cli.add_command(store_group)


def main() -> None:
    cli()
