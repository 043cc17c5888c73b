"""`--tls` and its files, on every command that talks to a cluster.

`--tls` (or TIDEMQ_TLS=1) connects to the name servers and brokers over
TLS, trusting the system's CAs; `--tls-ca PATH` trusts that CA instead, and
`--tls-cert/--tls-key` show a client certificate to a port that verifies
clients. Each file option implies `--tls`, and each has an environment
variable (TIDEMQ_TLS_CA, TIDEMQ_TLS_CERT, TIDEMQ_TLS_KEY), in the style of
TIDEMQ_ACCESS_KEY. Kept in the click context, like the ACL keys, so the
commands need no parameter of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tidemq.transport.tls import TlsConfig, TlsConfigError

__all__ = ["TLS_ENV", "client_tls_options", "tls_of"]

TLS_ENV = "TIDEMQ_TLS"
_META = "tidemq.tls"

F = TypeVar("F", bound=Callable[..., Any])


def _keep(ctx: click.Context, param: click.Parameter, value: object) -> None:
    if value:
        ctx.meta.setdefault(_META, {})[param.name] = value


def client_tls_options(command: F) -> F:
    """--tls, --tls-ca, --tls-cert, --tls-key (and their environment variables)."""
    path = click.Path(dir_okay=False, exists=True, path_type=Path)
    for name, env, text in (
        ("--tls-key", "TIDEMQ_TLS_KEY", "PEM private key for --tls-cert."),
        (
            "--tls-cert",
            "TIDEMQ_TLS_CERT",
            "PEM client certificate (for a port that verifies clients).",
        ),
        (
            "--tls-ca",
            "TIDEMQ_TLS_CA",
            "PEM CA the servers' certificates must chain to (implies --tls).",
        ),
    ):
        command = click.option(
            name, type=path, envvar=env, show_envvar=True, expose_value=False,
            callback=_keep, help=text,
        )(command)  # fmt: skip
    return click.option(
        "--tls",
        is_flag=True,
        envvar=TLS_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_keep,
        help="Connect over TLS (to a port in TLS permissive or enforcing mode).",
    )(command)


def tls_of(ctx: click.Context) -> TlsConfig | None:
    """The command's TLS settings, None for plain; a usage error if the files do not load."""
    given: dict[str, Any] = ctx.meta.get(_META, {})
    if not given:
        return None
    ca, cert, key = (given.get(name) for name in ("tls_ca", "tls_cert", "tls_key"))
    try:
        config = TlsConfig(
            ca=str(ca) if ca else None,
            cert=str(cert) if cert else None,
            key=str(key) if key else None,
        )
        config.context()
    except TlsConfigError as exc:
        raise click.UsageError(f"--tls: {exc}") from None
    return config
