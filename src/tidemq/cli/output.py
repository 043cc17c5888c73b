"""One way to print results: tables for people, JSON for programs."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

console = Console()
errors = Console(stderr=True)


def emit(data: Any, *, as_json: bool, title: str | None = None) -> None:
    """Print `data` (a mapping, or a list of row mappings) as JSON or as a table."""
    if as_json:
        json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
        return
    if isinstance(data, Mapping):
        table = Table(title=title, show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value")
        for key, value in data.items():
            table.add_row(str(key), _cell(value))
        console.print(table)
    elif isinstance(data, Sequence) and data and isinstance(data[0], Mapping):
        table = Table(title=title)
        for column in data[0]:
            table.add_column(str(column))
        for row in data:
            table.add_row(*(_cell(v) for v in row.values()))
        console.print(table)
    else:
        console.print(data)


def _cell(value: Any) -> str:
    if isinstance(value, Mapping | list):
        return json.dumps(value, default=str)
    return str(value)


def fail(message: str) -> None:
    """A readable error and a non-zero exit."""
    raise click.ClickException(message)
