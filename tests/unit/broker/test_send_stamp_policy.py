"""The send stamp (MSG_REGION, TRACE_ON) as a pure rule, and through the send
processor on a real in-memory store: a sent message is stamped with the
broker's settings, replacing what the client set; a copy the broker stores by
itself (a retry by CONSUMER_SEND_MSG_BACK) keeps what its original carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.broker.assembly import ALL_FEATURES
from tidemq.broker.config import BrokerConfig
from tidemq.broker.processors.send import send_stamp, stamped
from tidemq.broker.requests import SendRequest
from tidemq.common import properties as props
from tidemq.record.codec import decode_record
from tidemq.store.api import MessageStore, MessageToStore
from tidemq.testing.cores import memory_core

keys = st.sampled_from(["TAGS", "KEYS", "a", props.MSG_REGION, props.TRACE_ON, "CLUSTER"])
values = st.text(alphabet="abcXYZ019 -_", max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(keys, values), max_size=6),
    st.booleans(),
    st.sampled_from(["DefaultRegion", "eu-1"]),
    st.booleans(),
)
def test_the_stamp_is_put_once_over_anything_the_client_set(
    pairs: list[tuple[str, str]], trailing: bool, region: str, trace_on: bool
) -> None:
    raw = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    if not trailing and raw:
        raw = raw[:-1]  # a client string without its last separator
    result = stamped(raw, send_stamp(region, trace_on))
    decoded = props.decode_properties(result)
    expected = {**props.decode_properties(raw)}
    expected[props.MSG_REGION] = region
    expected[props.TRACE_ON] = "true" if trace_on else "false"
    assert decoded == expected
    assert result.count(props.MSG_REGION + "\x01") == 1
    assert result.count(props.TRACE_ON + "\x01") == 1
    assert result.endswith(send_stamp(region, trace_on))


def test_the_stamp_text() -> None:
    assert send_stamp("eu-1", False) == "MSG_REGION\x01eu-1\x02TRACE_ON\x01false\x02"


@pytest.mark.parametrize("region", ["", "eu 1\x01", "région"])
def test_a_region_that_cannot_be_stored_is_refused(tmp_path: Path, region: str) -> None:
    with pytest.raises(ValueError, match="region_id"):
        BrokerConfig(data_dir=tmp_path, region_id=region)


def test_settings_from_a_config_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "broker.json"
    path.write_text(json.dumps({"region_id": "eu-1", "trace_on": False}))
    config = BrokerConfig.from_file(path)
    assert (config.region_id, config.trace_on) == ("eu-1", False)
    assert BrokerConfig.parse_overrides(["trace_on=false", "region_id=ap-2"]) == {
        "trace_on": False,
        "region_id": "ap-2",
    }
    path.write_text(json.dumps({"trace_on": "false"}))  # a string, not a JSON boolean
    with pytest.raises(ValueError, match="trace_on='false': must be true or false"):
        BrokerConfig.from_file(path)


async def test_a_send_back_copy_keeps_what_its_original_carries(tmp_path: Path) -> None:
    core, store, _ = memory_core(tmp_path, ALL_FEATURES, region_id="eu-1", trace_on=False)
    sent = await core.send.send(
        SendRequest(
            producer_group="P",
            topic="Orders",
            queue_id=0,
            body=b"x",
            properties=f"{props.MSG_REGION}\x01client\x02",
        )
    )
    # a record stored before the broker stamped anything (an older tidemq)
    old = await store.put_message(MessageToStore("Orders", 0, b"old", "TAGS\x01a\x02"))
    fresh_offset = _offset_of(store, sent.queue_offset)
    for offset in (fresh_offset, old.physical_offset):
        await core.send.consumer_send_back(offset, "G", 0)  # delay level 3 (SCHEDULE_TOPIC)
    page = store.get_messages("g", "SCHEDULE_TOPIC_XXXX", 2, 0, 10)  # level 3's queue
    copies = [decode_record(buffer)[0].properties for buffer in page.buffers]
    assert [(c.get(props.MSG_REGION), c.get(props.TRACE_ON)) for c in copies] == [
        ("eu-1", "false"),  # as the sent message was stamped, the client's value replaced
        (None, None),  # not stamped now: Java's consumerSendMsgBack copies properties
    ]


def _offset_of(store: MessageStore, queue_offset: int) -> int:
    page = store.get_messages("g", "Orders", 0, queue_offset, 1)
    record, _ = decode_record(page.buffers[0])
    return record.commit_log_offset
