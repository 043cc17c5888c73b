"""Client versions by name (Java's MQVersion.Version) and RocketMQ's code labels."""

from __future__ import annotations

import pytest

from tidemq.protocol.codes import (
    RequestCode,
    ResponseCode,
    request_code_label,
    response_code_label,
)
from tidemq.protocol.versions import version_name, version_ordinal


@pytest.mark.parametrize(
    ("ordinal", "name"),
    [
        # indexes in apache/rocketmq common/.../MQVersion.java (rocketmq-all-5.3.3)
        (0, "V3_0_0_SNAPSHOT"),
        (15, "V3_0_0_FINAL"),
        (79, "V3_2_6"),
        (137, "V3_5_8"),
        (212, "V4_0_0_SNAPSHOT"),
        (407, "V4_9_7"),
        (413, "V5_0_0"),
        (441, "V5_1_4"),
        (479, "V5_3_3"),
        (611, "V5_9_9"),
    ],
)
def test_version_names_follow_java_ordinals(ordinal: int, name: str) -> None:
    assert version_name(ordinal) == name


def test_versions_past_the_enum_read_as_its_last_one() -> None:
    assert version_name(612) == version_name(10_000) == "V5_9_9"
    assert version_name(-1) == "V3_0_0_SNAPSHOT"


def test_code_labels_are_java_names_lower_cased() -> None:
    assert request_code_label(RequestCode.SEND_MESSAGE_V2) == "send_message_v2"
    assert request_code_label(RequestCode.PULL_MESSAGE) == "pull_message"
    assert response_code_label(ResponseCode.SUCCESS) == "success"
    assert response_code_label(ResponseCode.TOPIC_NOT_EXIST) == "topic_not_exist"
    assert request_code_label(987654) == "987654"
    assert response_code_label(-77) == "-77"


def test_a_release_written_with_dots_finds_its_ordinal() -> None:
    assert version_ordinal("4.9.7") == 407
    assert version_ordinal("5.0.5") == version_ordinal("5.0.5 ") == 423
    assert version_name(version_ordinal("5.1.4")) == "V5_1_4"
    assert version_ordinal("not-a-version") == 0
