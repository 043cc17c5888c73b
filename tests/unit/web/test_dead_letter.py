"""The copy a dead-letter resend stores: in the group's retry topic, due now,
with a fresh retry budget and the ids people know it by."""

from __future__ import annotations

import pytest

from tidemq.client._dead_letter import dead_letter_group, retry_copy
from tidemq.common.message import MessageExt


def dead_letter() -> MessageExt:
    return MessageExt(
        topic="%DLQ%billing",
        body=b"charge 7",
        flag=3,
        properties={
            "UNIQ_KEY": "ABC",
            "KEYS": "order-7",
            "TAGS": "charge",
            "RETRY_TOPIC": "Orders",
            "RECONSUME_TIME": "1",
            "MAX_RECONSUME_TIMES": "1",
            "DELAY": "4",
            "WAIT": "false",
            "ORIGIN_MESSAGE_ID": "",
            "region": "eu",
        },
        msg_id="7F000001000000000000000000000042",
    )


def test_the_copy_goes_to_the_retry_topic_with_a_fresh_budget() -> None:
    copy = retry_copy(dead_letter(), "billing")
    assert copy.topic == "%RETRY%billing"
    assert copy.body == b"charge 7" and copy.flag == 3
    assert copy.properties == {
        "UNIQ_KEY": "ABC",
        "KEYS": "order-7",
        "TAGS": "charge",
        "RETRY_TOPIC": "Orders",
        "RECONSUME_TIME": "0",
        "ORIGIN_MESSAGE_ID": "7F000001000000000000000000000042",
        "region": "eu",
    }


def test_only_a_dead_letter_of_that_group_is_resent() -> None:
    with pytest.raises(ValueError, match="not in the dead-letter topic %DLQ%other"):
        retry_copy(dead_letter(), "other")
    assert dead_letter_group("%DLQ%g") == "g"
    assert dead_letter_group("%DLQ%") is None
    assert dead_letter_group("Orders") is None
