"""What `cluster up` writes for each broker, and when it calls a master replicating:
pure functions of local_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.cli.local_cluster import (
    ClusterError,
    ClusterPlan,
    _master_replicating,
    broker_names,
    broker_settings,
)

DATA = Path("/data")


def test_fixed_ports_masters_and_slaves() -> None:
    plan = ClusterPlan(brokers=2, replicas=2, role="ASYNC_MASTER", flush="sync", base_port=20000)
    master = broker_settings(plan, DATA, "127.0.0.1:20000", 1, 0)
    slave = broker_settings(plan, DATA, "127.0.0.1:20000", 1, 1)
    assert (master["broker_name"], master["broker_id"], master["broker_role"]) == (
        "broker-b", 0, "ASYNC_MASTER",
    )  # fmt: skip
    assert (slave["broker_id"], slave["broker_role"]) == (1, "SLAVE")
    assert (master["listen_port"], master["ha_listen_port"]) == (20200, 20201)
    assert (slave["listen_port"], slave["ha_listen_port"]) == (20210, 20211)
    assert master["flush_mode"] == "sync"
    assert master["data_dir"] == "/data/broker-b-0"
    assert "enable_controller_mode" not in master


def test_controller_mode_numbers_replicas_from_one_and_names_the_controller() -> None:
    plan = ClusterPlan(replicas=3, controller=True, settings={"slave_timeout_ms": 500})
    ids = [broker_settings(plan, DATA, "ns:1", 0, copy)["broker_id"] for copy in range(3)]
    assert ids == [1, 2, 3]
    settings = broker_settings(plan, DATA, "ns:1", 0, 0)
    assert (settings["enable_controller_mode"], settings["controller_addr"]) == (True, "ns:1")
    assert settings["slave_timeout_ms"] == 500


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"brokers": 0}, "--brokers"),
        ({"replicas": 10}, "--replicas"),
        ({"role": "SLAVE"}, "--role"),
    ],
)
def test_a_bad_plan_is_refused(options: dict[str, object], said: str) -> None:
    with pytest.raises(ClusterError, match=said):
        ClusterPlan(**options)  # type: ignore[arg-type]


def test_broker_names_follow_rocketmq_samples() -> None:
    assert broker_names(3) == ["broker-a", "broker-b", "broker-c"]


@given(
    connected=st.integers(0, 3),
    wanted=st.integers(0, 3),
    end=st.integers(0, 1 << 40),
    acked=st.integers(0, 1 << 40),
)
def test_a_master_replicates_once_its_slaves_are_on_and_one_reported_its_end(
    connected: int, wanted: int, end: int, acked: int
) -> None:
    runtime = {
        "tidemqHaSlaves": str(connected),
        "tidemqHaSlaveAckOffset": str(acked),
        "commitLogMaxOffset": str(end),
    }
    expected = connected >= wanted and (wanted == 0 or acked >= end)
    assert _master_replicating(runtime, wanted) is expected
