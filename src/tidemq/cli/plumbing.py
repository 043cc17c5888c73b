"""What every command that talks to a cluster shares: `--namesrv`, `--json`
and the ACL credentials (`--access-key`/`--secret-key`, or TIDEMQ_ACCESS_KEY /
TIDEMQ_SECRET_KEY: every request is then signed), `--tls` (client_tls.py), running an AdminClient
call with failures turned into one line (with the server's response code,
for `--json`), and the parsers of times and KEY=VALUE pairs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import click

from tidemq.acl.credentials import ACCESS_KEY_ENV, SECRET_KEY_ENV, Credentials
from tidemq.cli.client_tls import client_tls_options, tls_of
from tidemq.cli.output import fail
from tidemq.client.admin import AdminClient, AdminError, parse_address_list
from tidemq.common import event_loop
from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.protocol import ProtocolError, ResponseCode

__all__ = [
    "DEFAULT_NAMESRV",
    "abort",
    "admin_options",
    "credentials_of",
    "iso_time",
    "parse_properties",
    "parse_timestamp",
    "run_admin",
]

DEFAULT_NAMESRV = "127.0.0.1:9876"

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _check_namesrv(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    try:
        return parse_address_list(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_CREDENTIALS_META = "tidemq.credentials"


def _keep_key(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Kept in the context for run_admin, so the commands need no parameter of their own."""
    if value:
        ctx.meta.setdefault(_CREDENTIALS_META, {})[param.name] = value


def credentials_of(ctx: click.Context) -> Credentials | None:
    """The command's --access-key/--secret-key (or environment), None without both."""
    given = ctx.meta.get(_CREDENTIALS_META, {})
    access_key, secret_key = given.get("access_key"), given.get("secret_key")
    if access_key is None and secret_key is None:
        return None
    if access_key is None or secret_key is None:
        raise click.UsageError(
            f"--access-key and --secret-key go together (or {ACCESS_KEY_ENV} and {SECRET_KEY_ENV})"
        )
    return Credentials(access_key, secret_key)


def admin_options(command: F) -> F:
    """--namesrv, --json, the ACL keys and --tls, on every command that talks to a cluster."""
    command = client_tls_options(command)
    command = click.option(
        "--secret-key",
        envvar=SECRET_KEY_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_keep_key,
        help="ACL secret key for --access-key.",
    )(command)
    command = click.option(
        "--access-key",
        envvar=ACCESS_KEY_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_keep_key,
        help="ACL access key: every request is signed (RocketMQ ACL 1.0).",
    )(command)
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(
        command
    )
    return click.option(
        "--namesrv",
        default=DEFAULT_NAMESRV,
        envvar="TIDEMQ_NAMESRV",
        show_default=True,
        show_envvar=True,
        callback=_check_namesrv,
        help="Name server address(es), HOST:PORT[;HOST:PORT].",
    )(command)


def abort(message: str, code: int | None = None) -> NoReturn:
    """Fail with one line (and the response code, when there is one)."""
    fail(message, code)
    raise click.ClickException(message)  # fail() always raises; this satisfies the checker


def abort_unknown_broker(broker: str, known: Sequence[str]) -> NoReturn:
    """A broker name the name servers do not know, with the names they do."""
    abort(f"no broker named {broker!r} is registered (known: {', '.join(known) or 'none'})")


def run_admin(
    namesrv: Sequence[str],
    action: Callable[[AdminClient], Awaitable[T]],
    *,
    failing: str | None = None,
) -> T:
    """Run `action` with a connected AdminClient; any AdminError becomes a clean exit
    (its message after `failing`, "cannot create user alice", when given)."""

    context = click.get_current_context()
    credentials = credentials_of(context)
    tls = tls_of(context)

    async def main() -> T:
        async with AdminClient(namesrv, credentials=credentials, tls=tls) as admin:
            return await action(admin)

    try:
        return event_loop.run(main())
    except AdminError as exc:
        abort(f"{failing}: {exc.message}" if failing else exc.message, exc.code)
    except ProtocolError as exc:  # a malformed answer the client did not expect
        abort(f"malformed response: {exc}", ResponseCode.SYSTEM_ERROR)


def iso_time(ms: int) -> str:
    """Local ISO-8601 time of epoch milliseconds; "-" for none."""
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from "1700000000000", "now" or ISO-8601 (local time if no zone)."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    if value.lower() == "now":
        return SYSTEM_CLOCK.now_ms()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time "
            "(e.g. 2024-05-01T12:00:00+02:00)"
        ) from None
    return round(moment.timestamp() * 1000)


def parse_properties(items: Sequence[str], option: str = "--property") -> dict[str, str]:
    """KEY=VALUE items of a repeatable `option` into a dict; click.BadParameter naming
    the option for one without "="."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"takes KEY=VALUE, got {item!r}", param_hint=option)
        result[key.strip()] = value
    return result
