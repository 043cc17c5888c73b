"""BrokerConfig settings taken from RocketMQ's proxy: their defaults, their
checks, and that `--set` reaches them typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemq.broker.config import BrokerConfig


def test_min_invisible_time_for_receive_defaults_to_the_proxys_10_s(tmp_path: Path) -> None:
    # ProxyConfig.java:127: minInvisibleTimeMillsForRecv = 10 s
    assert BrokerConfig(data_dir=tmp_path).min_invisible_time_mills_for_recv == 10_000
    overrides = BrokerConfig.parse_overrides(["min_invisible_time_mills_for_recv=0"])
    assert overrides == {"min_invisible_time_mills_for_recv": 0}
    assert BrokerConfig(data_dir=tmp_path, **overrides).min_invisible_time_mills_for_recv == 0


@pytest.mark.parametrize("value", [-1, 12 * 3600 * 1000 + 1])
def test_min_invisible_time_for_receive_out_of_range_is_refused(tmp_path: Path, value: int) -> None:
    problem = r"min_invisible_time_mills_for_recv=.*: must be 0\.\.43200000"
    with pytest.raises(ValueError, match=problem):
        BrokerConfig(data_dir=tmp_path, min_invisible_time_mills_for_recv=value)


def test_trace_topic_settings_default_as_rocketmqs_broker_config(tmp_path: Path) -> None:
    # BrokerConfig.java: traceTopicEnable = false, msgTraceTopicName = RMQ_SYS_TRACE_TOPIC
    config = BrokerConfig(data_dir=tmp_path)
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (
        False,
        "RMQ_SYS_TRACE_TOPIC",
    )
    overrides = BrokerConfig.parse_overrides(
        ["trace_topic_enable=true", "msg_trace_topic_name=Traces"]
    )
    assert overrides == {"trace_topic_enable": True, "msg_trace_topic_name": "Traces"}
    with pytest.raises(ValueError, match=r"msg_trace_topic_name: .*illegal characters"):
        BrokerConfig(data_dir=tmp_path, msg_trace_topic_name="no spaces")


def test_metrics_are_counted_only_with_an_http_endpoint(tmp_path: Path) -> None:
    assert not BrokerConfig(data_dir=tmp_path).metrics_counting
    assert BrokerConfig(data_dir=tmp_path, http_port=0).metrics_counting
    assert not BrokerConfig(data_dir=tmp_path, http_port=0, metrics_enable=False).metrics_counting


def test_metrics_label_is_rocketmqs_key_value_list(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path, metrics_label="env:prod,,zone:eu-1:a")
    assert config.metrics_labels == {"env": "prod", "zone": "eu-1:a"}
    overrides = BrokerConfig.parse_overrides(["metrics_label=env:test", "metrics_enable=false"])
    assert overrides == {"metrics_label": "env:test", "metrics_enable": False}
    for bad in ("env", "9env:x", "__name__:x", "a-b:c"):
        with pytest.raises(ValueError, match="metrics_label"):
            BrokerConfig(data_dir=tmp_path, metrics_label=bad)


def test_controller_mode_needs_controller_addresses(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="enable_controller_mode needs controller_addr"):
        BrokerConfig(data_dir=tmp_path, enable_controller_mode=True, broker_id=1)
    with pytest.raises(ValueError, match="controller_addr: not a host:port address"):
        BrokerConfig(
            data_dir=tmp_path, enable_controller_mode=True, controller_addr="nope", broker_id=1
        )
    config = BrokerConfig(
        data_dir=tmp_path,
        enable_controller_mode=True,
        controller_addr="127.0.0.1:9876;127.0.0.1:9886",
        broker_id=2,
    )
    assert config.broker_role.is_master  # the controller gives the role: any id goes
    assert config.controller_addresses == ("127.0.0.1:9876", "127.0.0.1:9886")
    with pytest.raises(ValueError, match="1 and up"):
        BrokerConfig(data_dir=tmp_path, enable_controller_mode=True, controller_addr="h:1")
    with pytest.raises(ValueError, match="fixed listen_port"):
        BrokerConfig(
            data_dir=tmp_path,
            enable_controller_mode=True,
            controller_addr="h:1",
            broker_id=1,
            listen_port=0,
        )
