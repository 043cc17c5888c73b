"""`tidemq serve --set`: a bad key or value stops before anything starts, with a
readable error and exit code 1; BrokerConfig checks the timer limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tidemq.broker.config import BrokerConfig
from tidemq.cli.main import cli


@pytest.mark.parametrize(
    "setting, problem",
    [
        ("timer_precision_ms=5", "must be 10..1000 milliseconds"),
        ("timer_precision_ms=1001", "must be 10..1000 milliseconds"),
        ("timer_max_delay_s=31536001", "365 days"),
        ("timer_max_delay_s=0", "365 days"),
        ("transaction_check_max=0", "transaction_check_max"),
        ("no_such_setting=1", "is not KEY=VALUE"),
        ("timer_enable=maybe", "expected true or false"),
    ],
)
def test_bad_settings_are_refused_before_starting(
    tmp_path: Path, setting: str, problem: str
) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--data-dir", str(tmp_path / "data"), "--set", setting]
    )
    assert result.exit_code == 1
    assert "--set:" in result.output and problem in result.output
    assert not (tmp_path / "data" / "store").exists()


def test_timer_and_transaction_settings_parse_to_typed_values(tmp_path: Path) -> None:
    overrides = BrokerConfig.parse_overrides(
        ["timer_precision_ms=10", "timer_max_delay_s=31536000", "timer_enable=false"]
    )
    config = BrokerConfig(data_dir=tmp_path, **overrides)
    assert (config.timer_precision_ms, config.timer_max_delay_s) == (10, 365 * 86400)
    assert config.timer_enable is False
    defaults = BrokerConfig(data_dir=tmp_path)
    assert (defaults.timer_precision_ms, defaults.timer_max_delay_s) == (100, 30 * 86400)
    assert (
        defaults.transaction_timeout_ms,
        defaults.transaction_check_interval_ms,
        defaults.transaction_check_max,
    ) == (6000, 30000, 15)
