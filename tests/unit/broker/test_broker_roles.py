"""A broker's role and id go together; the HA settings keep RocketMQ's defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig
from tidemq.ha.config import BrokerRole, HaSettings


def test_defaults_are_rocketmqs(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path)
    assert config.broker_role is BrokerRole.ASYNC_MASTER and config.broker_id == 0
    assert config.ha_settings == HaSettings(
        heartbeat_interval_s=5.0,
        housekeeping_interval_s=20.0,
        transfer_batch_size=32 * 1024,
        slave_timeout_s=3.0,
        max_gap_not_in_sync=256 * 1024 * 1024,
    )
    assert config.ha_port(10911) == 10912  # haListenPort: the listen port + 1
    assert BrokerConfig(data_dir=tmp_path, listen_port=0).ha_port(40000) == 0
    assert BrokerConfig(data_dir=tmp_path, ha_listen_port=0).ha_port(10911) == 0


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"broker_id": 1}, r"broker_id=1 is a slave's id, but broker_role is ASYNC_MASTER"),
        ({"broker_id": 2, "broker_role": "SYNC_MASTER"}, r"a master has broker_id 0"),
        ({"broker_role": "SLAVE"}, r"SLAVE with broker_id 0: 0 is the master's id"),
        ({"broker_role": "BACKUP", "broker_id": 1}, r"unknown broker role 'BACKUP': one of"),
        ({"broker_id": -1}, r"broker_id=-1"),
        ({"ha_master_address": "nohost"}, r"ha_master_address='nohost': expected host:port"),
        ({"ha_housekeeping_interval_ms": 1000}, r"housekeeping interval must be longer"),
    ],
)
def test_a_config_that_cannot_work_says_why(
    tmp_path: Path, settings: dict[str, object], problem: str
) -> None:
    path = tmp_path / "broker.json"
    path.write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=problem):
        BrokerConfig.from_file(path)


def test_a_slave_config_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "slave.json"
    path.write_text(json.dumps({"broker_role": "slave", "broker_id": 1}))
    config = BrokerConfig.from_file(path)
    assert config.broker_role is BrokerRole.SLAVE
    overrides = BrokerConfig.parse_overrides(["broker_role=SYNC_MASTER", "slave_timeout_ms=500"])
    assert overrides == {"broker_role": BrokerRole.SYNC_MASTER, "slave_timeout_ms": 500}
