"""`tls=` on every client class (blocking and asyncio, admin included), into the
config and down to the remoting client; --tls and its files on every CLI
command that talks to a cluster; the TLS options on the server commands."""

from __future__ import annotations

import inspect

import click
import pytest

import tidemq
from tidemq.cli.main import cli
from tidemq.client._base import make_client_config
from tidemq.client.instance import ClientConfig
from tidemq.client.transaction import ProducerOptions
from tidemq.transport.tls import TlsConfig, TlsConfigError, client_tls

CLIENT_CLASSES = [
    "Producer",
    "AsyncProducer",
    "PushConsumer",
    "AsyncPushConsumer",
    "LitePullConsumer",
    "AsyncLitePullConsumer",
    "SimpleConsumer",
    "AsyncSimpleConsumer",
    "AdminClient",
]


@pytest.mark.parametrize("name", CLIENT_CLASSES)
def test_every_client_class_takes_tls(name: str) -> None:
    parameter = inspect.signature(getattr(tidemq, name)).parameters.get("tls")
    assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is None


def test_transaction_producers_take_tls_through_the_producer_options() -> None:
    assert "tls" in ProducerOptions.__annotations__


def test_tls_goes_into_the_config_without_changing_the_callers() -> None:
    assert make_client_config("127.0.0.1:9876", None, None).tls is None
    assert make_client_config("127.0.0.1:9876", None, None, tls=True).tls == TlsConfig()
    pinned = TlsConfig(ca="ca.pem", check_hostname=False)
    mine = ClientConfig(namesrv="127.0.0.1:9876")
    assert make_client_config("x:1", None, mine, tls=pinned).tls is pinned
    assert mine.tls is None
    assert make_client_config("x:1", None, mine, tls=False) is mine


def test_client_tls_accepts_true_false_or_a_config_only() -> None:
    assert client_tls(None) is None and client_tls(False) is None
    assert client_tls(True) == TlsConfig()
    with pytest.raises(TypeError):
        client_tls("yes")  # type: ignore[arg-type]
    with pytest.raises(TlsConfigError, match="go together"):
        TlsConfig(cert="client.pem")


async def test_the_instance_and_the_admin_client_dial_with_it() -> None:
    config = make_client_config("127.0.0.1:9876", None, None, tls=True)
    instance = tidemq.AsyncProducer("tls-unit", client_config=config)
    assert instance._instance._remoting.tls == TlsConfig()
    admin = tidemq.AdminClient("127.0.0.1:9876", tls=True)
    assert admin._client().tls == TlsConfig()
    await admin.close()


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


def test_every_cluster_command_takes_tls() -> None:
    talking = [
        (name, command)
        for name, command in _commands(cli)
        if any("--namesrv" in p.opts for p in command.params)
        and name not in ("serve", "namesrv", "broker")
    ]
    assert len(talking) >= 15
    for name, command in talking:
        options = {opt for p in command.params for opt in p.opts}
        assert {"--tls", "--tls-ca", "--tls-cert", "--tls-key"} <= options, name
        envvars = {p.envvar for p in command.params if isinstance(p, click.Option)}
        assert {"TIDEMQ_TLS", "TIDEMQ_TLS_CA", "TIDEMQ_TLS_CERT", "TIDEMQ_TLS_KEY"} <= envvars


@pytest.mark.parametrize("name", ["serve", "namesrv", "broker"])
def test_every_server_command_takes_the_tls_options(name: str) -> None:
    command = cli.commands[name]
    options = {opt for p in command.params for opt in p.opts}
    assert {"--tls-mode", "--tls-cert", "--tls-key", "--tls-ca", "--tls-verify-client"} <= options
