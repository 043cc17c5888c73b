"""What every client shares (_base): group names, the ClientConfig from the
common arguments, async with, and the running/shut-down checks."""

from __future__ import annotations

import os

import pytest

from tidemq.client._base import GroupClient, check_group, make_client_config
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.protocol import ResponseCode


@pytest.mark.parametrize("group", ["G", "order_group-1", "%RETRY%g", "a|b", "x" * 255])
def test_valid_group_names_pass(group: str) -> None:
    assert check_group(group, "consumer") == group


@pytest.mark.parametrize("group", ["", " ", "has space", "dot.ted", "x" * 256, None, 7])
def test_invalid_group_names_are_refused_with_the_rule(group: object) -> None:
    with pytest.raises(ValueError, match=r"producer group .* is invalid: 1 to 255 characters"):
        check_group(group, "producer")


def test_the_placeholder_consumer_group_is_refused_for_consumers_only() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        check_group("DEFAULT_CONSUMER", "consumer")
    assert check_group("DEFAULT_CONSUMER", "producer") == "DEFAULT_CONSUMER"


def test_client_config_is_the_callers_or_built_from_namesrv_and_instance_name() -> None:
    mine = ClientConfig(namesrv="10.0.0.1:9876", instance_name="mine")
    assert make_client_config("ignored:1", "other", mine) is mine
    built = make_client_config("10.0.0.2:9876", "named", None)
    assert built.namesrv == "10.0.0.2:9876" and built.instance_name == "named"
    default = make_client_config("10.0.0.3:9876", None, None)
    # no name given: Java's per-object default (pid#nanotime), not a shared one
    assert default.instance_name.startswith(f"{os.getpid()}#")
    assert default.instance_name != make_client_config("10.0.0.3:9876", None, None).instance_name


class Member(GroupClient):
    _kind = "widget"

    def __init__(self) -> None:
        self._group = "W"
        self._config = ClientConfig(namesrv="127.0.0.1:1", instance_name="inst")
        self._state = "created"

    async def start(self) -> None:
        self._state = "running"

    async def shutdown(self) -> None:
        self._state = "closed"


async def test_group_client_states_and_async_with() -> None:
    member = Member()
    assert member.group == "W"
    assert member.client_id == f"{member._config.client_ip}@inst"
    member._check_open()
    with pytest.raises(ClientError, match=r"widget W is not started \(await start\(\) first\)"):
        member._check_running()
    async with member as entered:
        assert entered is member
        member._check_running()
    with pytest.raises(ClientError, match="widget W is shut down") as error:
        member._check_running()
    assert error.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(ClientError, match="widget W is shut down"):
        member._check_open()
