from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.broker.groups import (
    GroupError,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)
from tidemq.broker.offsets import ConsumerOffsetManager, plan_reset, split_offset_key
from tidemq.common.clock import ManualClock
from tidemq.common.names import validate_group_name


def groups(tmp_path: Path, auto_create: bool = True) -> SubscriptionGroupManager:
    manager = SubscriptionGroupManager(
        tmp_path / "config", auto_create=auto_create, clock=ManualClock()
    )
    manager.load()
    return manager


def test_find_auto_creates_with_java_defaults(tmp_path: Path) -> None:
    manager = groups(tmp_path)
    config = manager.find("CG")
    assert config is not None
    assert config.retry_max_times == 16
    assert config.retry_queue_nums == 1
    assert config.consume_broadcast_enable and config.notify_consumer_ids_changed_enable
    assert manager.find("bad group!") is None
    stored = json.loads((tmp_path / "config" / "subscriptionGroup.json").read_text())
    entry = stored["subscriptionGroupTable"]["CG"]
    assert entry["retryMaxTimes"] == 16
    assert entry["whichBrokerWhenConsumeSlowly"] == 1
    assert "TOOLS_CONSUMER" in stored["subscriptionGroupTable"]


def test_without_auto_create_only_known_and_system_groups(tmp_path: Path) -> None:
    manager = groups(tmp_path, auto_create=False)
    assert manager.find("CG") is None
    assert manager.find("TOOLS_CONSUMER") is not None
    manager.update(SubscriptionGroupConfig("CG", retry_max_times=2))
    assert manager.find("CG") == SubscriptionGroupConfig("CG", retry_max_times=2)


def test_update_delete_and_reload(tmp_path: Path) -> None:
    manager = groups(tmp_path)
    raw = {"groupName": "G", "retryMaxTimes": 3, "consumeEnable": False, "unknown": 1}
    manager.update(SubscriptionGroupConfig.from_json(raw))
    reloaded = groups(tmp_path)
    config = reloaded.get("G")
    assert config is not None and config.retry_max_times == 3 and not config.consume_enable
    assert reloaded.delete("G") and not reloaded.delete("G")
    with pytest.raises(GroupError):
        reloaded.delete("TOOLS_CONSUMER")
    with pytest.raises(GroupError, match="illegal"):
        reloaded.update(SubscriptionGroupConfig("a b"))
    with pytest.raises(ValueError, match="retryMaxTimes"):
        SubscriptionGroupConfig.from_json({"groupName": "G", "retryMaxTimes": "many"})
    assert validate_group_name("CID_x-1") is None


def test_offsets_commit_query_ignore_negatives_and_persist(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "config")
    offsets.load()
    assert offsets.query("CG", "T", 0) == -1
    assert offsets.commit("CG", "T", 0, 5)
    assert not offsets.commit("CG", "T", 0, -1)
    assert not offsets.commit("CG", "T", -1, 3)
    offsets.commit("CG", "T", 1, 0)
    offsets.commit("CG2", "T", 0, 7)
    assert offsets.query("CG", "T", 0) == 5
    assert offsets.dirty
    offsets.persist()
    assert not offsets.dirty
    stored = json.loads((tmp_path / "config" / "consumerOffset.json").read_text())
    assert stored == {"offsetTable": {"T@CG": {"0": 5, "1": 0}, "T@CG2": {"0": 7}}}
    reloaded = ConsumerOffsetManager(tmp_path / "config")
    reloaded.load()
    assert reloaded.query_all("CG", "T") == {0: 5, 1: 0}
    assert reloaded.topics_of_group("CG2") == {"T"}
    assert reloaded.groups_of_topic("T") == {"CG", "CG2"}
    reloaded.remove_group("CG2")
    assert reloaded.groups_of_topic("T") == {"CG"}
    reloaded.remove_topic("T")
    assert reloaded.all_offsets() == {}


def test_offsets_file_with_bad_entries_is_read_leniently(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    document = {"offsetTable": {"T@G": {"0": 3, "x": 1, "1": -4}, "nokey": {"0": 1}}}
    (config / "consumerOffset.json").write_text(json.dumps(document))
    offsets = ConsumerOffsetManager(config)
    offsets.load()
    assert offsets.all_offsets() == {"T@G": {0: 3}}
    assert split_offset_key("T@G") == ("T", "G")
    assert split_offset_key("nokey") is None


def test_plan_reset() -> None:
    current = {0: 10, 1: 2}
    targets = {0: 4, 1: 6, 2: 3}
    assert plan_reset(current, targets, force=True) == {0: 4, 1: 6, 2: 3}
    assert plan_reset(current, targets, force=False) == {0: 4, 1: 2, 2: 3}
    assert plan_reset({}, {0: -5}, force=True) == {0: 0}
