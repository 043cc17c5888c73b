from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemq.broker.topics import (
    AUTO_CREATE_TOPIC_KEY,
    TopicConfig,
    TopicConfigManager,
    TopicError,
    is_system_topic,
)
from tidemq.common.atomic_file import write_json_atomically
from tidemq.common.clock import ManualClock
from tidemq.common.names import validate_topic_name
from tidemq.store.config import SCHEDULE_TOPIC


def manager(tmp_path: Path, **kwargs: object) -> TopicConfigManager:
    topics = TopicConfigManager(tmp_path / "config", clock=ManualClock(), **kwargs)  # type: ignore[arg-type]
    topics.load()
    return topics


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%CG_1", "a|b", "x-y_z", "T" * 127])
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) is None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("bad topic", "illegal characters"),
        ("tópico", "illegal characters"),
        ("a/b", "illegal characters"),
        ("T" * 128, "longer than the maximum of 127"),
    ],
)
def test_invalid_topic_names_say_why(name: str, words: str) -> None:
    problem = validate_topic_name(name)
    assert problem is not None and words in problem


def test_system_topics() -> None:
    assert is_system_topic("TBW102")
    assert is_system_topic(SCHEDULE_TOPIC)
    assert is_system_topic("rmq_sys_anything")
    assert not is_system_topic("TopicTest")


def test_load_creates_system_topics_and_persists(tmp_path: Path) -> None:
    topics = manager(tmp_path, default_topic_queue_nums=8)
    tbw = topics.get(AUTO_CREATE_TOPIC_KEY)
    assert tbw is not None and tbw.perm == 7 and tbw.write_queue_nums == 8
    schedule = topics.get(SCHEDULE_TOPIC)
    assert schedule is not None and schedule.read_queue_nums == 18
    assert topics.get("DefaultCluster") is not None
    assert topics.get("broker-a") is not None
    stored = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert stored["topicConfigTable"]["TBW102"]["perm"] == 7
    assert stored["dataVersion"]["counter"] >= 1
    assert not list((tmp_path / "config").glob("*.tmp"))


def test_without_auto_create_there_is_no_template(tmp_path: Path) -> None:
    topics = manager(tmp_path, auto_create_topic=False)
    assert topics.get(AUTO_CREATE_TOPIC_KEY) is None
    assert topics.create_in_send("New", AUTO_CREATE_TOPIC_KEY, 4) is None


def test_create_in_send_inherits_from_the_template(tmp_path: Path) -> None:
    changes: list[int] = []
    topics = manager(tmp_path, default_topic_queue_nums=4)
    topics.on_change = lambda: changes.append(1)
    version = topics.data_version.counter
    created = topics.create_in_send("Orders", AUTO_CREATE_TOPIC_KEY, 16)
    assert created == TopicConfig("Orders", 4, 4, 6)
    assert topics.create_in_send("Small", AUTO_CREATE_TOPIC_KEY, 2) == TopicConfig("Small", 2, 2, 6)
    assert topics.create_in_send("X", "NoTemplate", 4) is None
    assert topics.create_in_send("Orders2", "Orders", 4) is None  # not inheritable
    assert topics.create_in_send("bad name", AUTO_CREATE_TOPIC_KEY, 4) is None
    assert changes == [1, 1]
    assert topics.data_version.counter == version + 2
    reloaded = manager(tmp_path)
    assert reloaded.get("Orders") == created
    assert reloaded.data_version.counter == topics.data_version.counter


def test_retry_and_dlq_topics(tmp_path: Path) -> None:
    topics = manager(tmp_path)
    retry = topics.ensure_retry_topic("CG")
    assert retry == TopicConfig("%RETRY%CG", 1, 1, 6)
    assert topics.ensure_retry_topic("CG") is retry
    assert topics.ensure_dlq_topic("CG") == TopicConfig("%DLQ%CG", 1, 1, 6)
    assert topics.ensure_retry_topic("x" * 120) is not None  # %RETRY% topics may reach 255
    assert topics.ensure_retry_topic("x" * 250) is None


def test_update_and_delete_refuse_system_topics_and_bad_names(tmp_path: Path) -> None:
    topics = manager(tmp_path)
    with pytest.raises(TopicError, match="conflict with system topic"):
        topics.update(TopicConfig("TBW102", 8, 8))
    with pytest.raises(TopicError, match="illegal characters"):
        topics.update(TopicConfig("a b", 8, 8))
    with pytest.raises(TopicError, match="1024"):
        topics.update(TopicConfig("Big", 2000, 2000))
    topics.update(TopicConfig("Mine", 2, 3, 4))
    assert topics.get("Mine") == TopicConfig("Mine", 2, 3, 4)
    assert topics.update(TopicConfig(SCHEDULE_TOPIC, 18, 18), allow_system=True)
    with pytest.raises(TopicError, match="system topic"):
        topics.delete("TBW102")
    assert topics.delete("Mine") is True
    assert topics.delete("Mine") is False
    assert manager(tmp_path).get("Mine") is None


def test_a_corrupt_file_is_an_error_not_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"topics\.json"):
        manager(tmp_path)


def test_write_json_atomic_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x" / "doc.json"
    write_json_atomically(path, {"a": 1})
    write_json_atomically(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["doc.json"]


def test_trace_topic_enable_creates_the_trace_topic_as_a_system_topic(tmp_path: Path) -> None:
    # Java's TopicConfigManager with traceTopicEnable: msgTraceTopicName, 1 read and
    # 1 write queue, added to the system topics.
    topics = manager(tmp_path, trace_topic="MyTraces")
    assert topics.get("MyTraces") == TopicConfig("MyTraces", 1, 1, 6)
    with pytest.raises(TopicError, match="conflict with system topic"):
        topics.update(TopicConfig("MyTraces", 8, 8))
    with pytest.raises(TopicError, match="system topic"):
        topics.delete("MyTraces")
    assert manager(tmp_path / "off").get("RMQ_SYS_TRACE_TOPIC") is None


def test_a_trace_sent_may_create_the_trace_topic_as_java_lets_it(tmp_path: Path) -> None:
    # createTopicInSendMessageMethod refuses no system topic: RMQ_SYS_TRACE_TOPIC
    # appears with a client's first trace when topics are auto-created.
    topics = manager(tmp_path)
    created = topics.create_in_send("RMQ_SYS_TRACE_TOPIC", AUTO_CREATE_TOPIC_KEY, 4)
    assert created == TopicConfig("RMQ_SYS_TRACE_TOPIC", 4, 4, 6)
    assert topics.create_in_send("SELF_TEST_TOPIC_2", AUTO_CREATE_TOPIC_KEY, 4) is not None
    assert topics.create_in_send("rmq_sys_other", AUTO_CREATE_TOPIC_KEY, 4) is None
    assert (
        manager(tmp_path / "off", auto_create_topic=False).create_in_send(
            "RMQ_SYS_TRACE_TOPIC", AUTO_CREATE_TOPIC_KEY, 4
        )
        is None
    )
