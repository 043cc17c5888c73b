"""`credentials=` on every client class (blocking and asyncio, admin included), and
--access-key/--secret-key on every CLI command that talks to a cluster."""

from __future__ import annotations

import inspect

import click
import pytest

import tidemq
from tidemq.cli.main import cli
from tidemq.client._base import make_client_config
from tidemq.client.instance import ClientConfig
from tidemq.client.transaction import ProducerOptions

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
def test_every_client_class_takes_credentials(name: str) -> None:
    parameter = inspect.signature(getattr(tidemq, name)).parameters.get("credentials")
    assert parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY


def test_transaction_producers_take_credentials_through_the_producer_options() -> None:
    assert "credentials" in ProducerOptions.__annotations__
    for name in ("TransactionProducer", "AsyncTransactionProducer"):
        kinds = [p.kind for p in inspect.signature(getattr(tidemq, name)).parameters.values()]
        assert inspect.Parameter.VAR_KEYWORD in kinds


def test_credentials_go_into_the_config_without_changing_the_callers() -> None:
    credentials = tidemq.Credentials("accessKey1", "secretKey1")
    assert make_client_config("127.0.0.1:9876", None, None, credentials).credentials == credentials
    mine = ClientConfig(namesrv="127.0.0.1:9876")
    assert make_client_config("x:1", None, mine, credentials).credentials == credentials
    assert mine.credentials is None
    assert make_client_config("x:1", None, mine) is mine


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


def test_every_cluster_command_takes_the_keys() -> None:
    talking = [
        (name, command)
        for name, command in _commands(cli)
        if any("--namesrv" in p.opts for p in command.params)
        and name not in ("serve", "namesrv", "broker")
    ]
    assert len(talking) >= 15
    for name, command in talking:
        options = {opt for p in command.params for opt in p.opts}
        assert {"--access-key", "--secret-key"} <= options, name
        envvars = {p.envvar for p in command.params if isinstance(p, click.Option)}
        assert {"TIDEMQ_ACCESS_KEY", "TIDEMQ_SECRET_KEY"} <= envvars, name
