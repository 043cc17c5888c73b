"""A real ali-ons (Node) producer's Aliyun timer message (`setStartDeliverTime`,
the __STARTDELIVERTIME property) is held by tidemq until its time, then
delivered once to its topic; a plain message sent after it is not held."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from ali_ons_harness import ScriptRunner, unique

from tidemq.common.message import MessageExt
from tidemq.testing.client_support import read_topic
from tidemq.testing.waiting import eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]


async def test_start_deliver_time_from_ali_ons_is_honoured(scripts: ScriptRunner) -> None:
    topic = unique("IT_AliTimer")
    scripts.server.create_topic(topic, queues=2)
    script = await asyncio.to_thread(
        scripts.run, "ali_producer_timer", timeout=60, topic=topic, group=unique("alitimer")
    )
    sent = {event["label"]: event for event in script.of_kind("sent")}
    assert set(sent) == {"timed", "plain"}, sent
    assert all(event["sendStatus"] == "SEND_OK" for event in sent.values())
    namesrv = scripts.server.namesrv

    first = await read_topic(namesrv, topic)
    bodies = {m.body for m in first}
    if b"due later" not in bodies:  # not held only if the 2 s went by meanwhile
        assert b"right away" in bodies

    async def both() -> list[MessageExt] | None:
        got = await read_topic(namesrv, topic)
        return got if len(got) == 2 else None

    got = {m.body: m for m in await eventually(both, "the timed message", timeout=30)}
    timed = got[b"due later"]
    assert timed.store_timestamp >= int(sent["timed"]["deliverAt"])
    # ali-ons sets no client id (UNIQ_KEY), so the delivered copy has its own offset id.
    assert timed.tags == "TagTimer" and timed.topic == topic
