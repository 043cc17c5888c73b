"""One way to print results: tables for people, JSON for programs; and one
way to fail: a one-line error and a non-zero exit (a JSON object with
`--json`, see JsonErrors in main.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from tidemq.protocol.codes import response_code_name

console = Console()
errors = Console(stderr=True)

_UNBOUNDED = 1_000_000


def emit(data: Any, *, as_json: bool, title: str | None = None) -> None:
    """Print `data` (a mapping, or a list of row mappings) as JSON or as a table.

    Nothing is ever cut: a table too wide for the terminal is printed as
    plain lines instead (`field: value` for a mapping, one `key=value ...`
    line per row), which the terminal wraps but never truncates, so ids and
    addresses come out whole.
    """
    if as_json:
        json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
        return
    if isinstance(data, Mapping):
        rows: list[Mapping[str, Any]] = [data]
        table = Table(show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value")
        for key, value in data.items():
            table.add_row(str(key), _cell(value))
    elif isinstance(data, Sequence) and data and isinstance(data[0], Mapping):
        rows = list(data)
        table = Table()
        for column in data[0]:
            table.add_column(str(column))
        for row in data:
            table.add_row(*(_cell(v) for v in row.values()))
    else:
        console.print(data)
        return
    width = console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum
    if width > console.width:
        if title:
            click.echo(title)
        for line in _plain_lines(rows, is_mapping=isinstance(data, Mapping)):
            click.echo(line)
        return
    if title and len(title) <= width:
        table.title = title
    elif title:
        click.echo(title)
    console.print(table)


def _plain_lines(rows: Sequence[Mapping[str, Any]], *, is_mapping: bool) -> list[str]:
    if is_mapping:
        return [f"{key}: {_cell(value)}" for key, value in rows[0].items()]
    return ["  ".join(f"{key}={_cell(value)}" for key, value in row.items()) for row in rows]


def _cell(value: Any) -> str:
    if isinstance(value, Mapping | list):
        return json.dumps(value, default=str)
    return str(value)


class CommandError(click.ClickException):
    """A failed command: one readable line, with the RocketMQ response code
    (or client-side RPC_* code) when a server or the client gave one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int | None = None) -> None:
    """A readable error and a non-zero exit."""
    raise CommandError(" ".join(message.split()), code)


def error_json(exc: click.ClickException) -> dict[str, Any]:
    """What `--json` prints for a failure: the message, and the code and its name
    when there is one (null for usage errors, whose exit code is 2)."""
    code = exc.code if isinstance(exc, CommandError) else None
    return {
        "error": exc.format_message(),
        "code": code,
        "code_name": response_code_name(code) if code is not None else None,
    }


class JsonReported(click.ClickException):
    """A failure of a `--json` command: shown as one JSON object on stdout."""

    def __init__(self, original: click.ClickException) -> None:
        super().__init__(original.format_message())
        self.original = original

    def show(self, file: IO[Any] | None = None) -> None:
        stream = file if file is not None else sys.stdout
        stream.write(json.dumps(error_json(self.original), sort_keys=True) + "\n")
        stream.flush()


class _JsonReportedUsage(JsonReported):
    exit_code = 2


def json_reported(original: click.ClickException) -> JsonReported:
    """`original` to be shown as JSON, with its exit code (2 for usage errors)."""
    if original.exit_code == _JsonReportedUsage.exit_code:
        return _JsonReportedUsage(original)
    return JsonReported(original)
