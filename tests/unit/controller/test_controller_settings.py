"""The embedded controller's settings: flags over the --config file, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.cli.controller_settings import controller_config
from tidemq.common.clock import ManualClock
from tidemq.controller.config import parse_addresses
from tidemq.controller.liveness import LiveTable
from tidemq.controller.state import LiveInfo


def settings(path: Path | None = None, **flags: object) -> object:
    defaults: dict[str, object] = {
        "host": "127.0.0.1",
        "port": 9876,
        "enable": None,
        "raft_port": None,
        "peers": None,
        "data_dir": None,
    }
    return controller_config(path, **{**defaults, **flags})  # type: ignore[arg-type]


def test_off_unless_enabled(tmp_path: Path) -> None:
    assert settings() is None
    config = tmp_path / "namesrv.json"
    config.write_text(json.dumps({"enable_controller_in_namesrv": True, "controller_port": 9900}))
    from_file = settings(config)
    assert from_file is not None and from_file.raft_address == "127.0.0.1:9900"  # type: ignore[attr-defined]
    assert settings(config, enable=False) is None  # the flag wins


def test_defaults_and_peers() -> None:
    config = settings(enable=True, peers="127.0.0.1:9877;127.0.0.1:9887;127.0.0.1:9897")
    assert config.raft_address == "127.0.0.1:9877"  # type: ignore[attr-defined]
    assert config.partners == ("127.0.0.1:9887", "127.0.0.1:9897")  # type: ignore[attr-defined]
    assert config.majority == 2  # type: ignore[attr-defined]
    assert config.data_dir == Path("controller-data/9877")  # type: ignore[attr-defined]


def test_bad_settings_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not among --controller-peers"):
        settings(enable=True, peers="127.0.0.1:1;127.0.0.1:2")
    with pytest.raises(ValueError, match="needs --controller-port"):
        settings(enable=True, port=0)
    config = tmp_path / "namesrv.json"
    config.write_text(json.dumps({"enable_controler_in_namesrv": True}))
    with pytest.raises(ValueError, match=r"unknown name server settings.*enable_controler"):
        settings(config)
    with pytest.raises(ValueError, match="not a host:port address"):
        parse_addresses("127.0.0.1:9876;nonsense")


def test_a_replica_is_alive_until_its_timeout_passes() -> None:
    clock = ManualClock()
    table = LiveTable(clock)
    assert not table.alive("b", 1)
    table.beat("b", 1, "h:1", 2000, LiveInfo(epoch=3, max_offset=10))
    clock.advance(1.9)
    assert table.alive("b", 1) and table.info("b", 1).epoch == 3
    clock.advance(0.2)
    assert not table.alive("b", 1)
    assert table.forget_dead() == [("b", 1, "h:1")]
    assert table.info("b", 1) == LiveInfo()
