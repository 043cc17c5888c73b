"""The policy file reloaded on change (a manual clock); a bad file keeps the last good one."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tidemq.acl.plain_config import AclConfigError
from tidemq.acl.policy_file import PolicyFile
from tidemq.acl.validator import AclPolicy
from tidemq.common.clock import ManualClock

GOOD = "accounts:\n  - {accessKey: firstKey1, secretKey: firstSecret1}\n"
OTHER = "accounts:\n  - {accessKey: secondKey2, secretKey: secondSecret2}\n"


def keys(policy: AclPolicy) -> list[str]:
    return [a.access_key for a in policy.config.accounts]


def rewrite(path: Path, text: str) -> None:
    """New content with an mtime that surely differs (coarse file systems)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.fixture
def acl_path(tmp_path: Path) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(GOOD, encoding="utf-8")
    return path


def test_a_change_is_taken_at_the_first_poll_after_the_interval(acl_path: Path) -> None:
    clock = ManualClock()
    seen: list[AclPolicy] = []
    policy_file = PolicyFile(acl_path, clock, interval_s=5.0, on_change=seen.append)
    assert keys(policy_file.policy) == ["firstKey1"]
    rewrite(acl_path, OTHER)
    clock.advance(4.9)
    assert policy_file.poll() is False
    assert keys(policy_file.policy) == ["firstKey1"]
    clock.advance(0.1)
    assert policy_file.poll() is True
    assert keys(policy_file.policy) == ["secondKey2"]
    assert [keys(p) for p in seen] == [["secondKey2"]]
    assert policy_file.reloads == 1


def test_a_touch_without_new_content_is_no_reload(acl_path: Path) -> None:
    clock = ManualClock()
    policy_file = PolicyFile(acl_path, clock, interval_s=1.0)
    rewrite(acl_path, GOOD)
    clock.advance(1.0)
    assert policy_file.poll() is False
    assert policy_file.reloads == 0


def test_a_malformed_file_keeps_the_last_good_policy_and_is_logged_once(
    acl_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    policy_file = PolicyFile(acl_path, clock, interval_s=1.0)
    with caplog.at_level(logging.ERROR, logger="tidemq.acl"):
        rewrite(acl_path, "accounts:\n  - {accessKey: short, secretKey: topSecretValue}\n")
        for _ in range(3):
            clock.advance(1.0)
            assert policy_file.poll() is False
        rewrite(acl_path, "accounts: [")
        clock.advance(1.0)
        assert policy_file.poll() is False
    assert keys(policy_file.policy) == ["firstKey1"]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "accessKey must be longer than 6 characters" in messages[0]
    assert "not valid YAML" in messages[1]
    assert all("topSecretValue" not in m for m in messages)
    rewrite(acl_path, OTHER)
    clock.advance(1.0)
    assert policy_file.poll() is True
    assert keys(policy_file.policy) == ["secondKey2"]


def test_a_file_gone_missing_keeps_the_policy_and_one_coming_back_is_read(acl_path: Path) -> None:
    clock = ManualClock()
    policy_file = PolicyFile(acl_path, clock, interval_s=1.0)
    acl_path.unlink()
    clock.advance(1.0)
    assert policy_file.poll() is False
    assert keys(policy_file.policy) == ["firstKey1"]
    acl_path.write_text(OTHER, encoding="utf-8")
    clock.advance(1.0)
    assert policy_file.poll() is True
    assert keys(policy_file.policy) == ["secondKey2"]


def test_an_unusable_file_at_start_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match="cannot read"):
        PolicyFile(tmp_path / "missing.yml", ManualClock())
    bad = tmp_path / "bad.yml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(AclConfigError, match="not UTF-8"):
        PolicyFile(bad, ManualClock())
