"""A real ali-ons (Node) producer against the tidemq Python push consumer: tags
(a tag not subscribed is filtered out), keys, user properties, the user flag and
a body over 4 KiB that ali-ons compressed arrive intact.

The producer runs `js/ali_producer_send.js`; the push consumer runs here, in the
test process, against the module's `tidemq serve`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import threading

import pytest
from ali_ons_harness import NodeScript, ScriptRunner, unique

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.common.message import MessageExt
from tidemq.testing.waiting import eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]


def check(script: NodeScript, condition: bool, message: str) -> None:
    if not condition:
        script.fail(message)


async def test_tidemq_push_consumer_receives_what_ali_ons_sends(scripts: ScriptRunner) -> None:
    topic = unique("IT_AliProd")
    scripts.server.create_topic(topic, queues=4)
    received: dict[str, list[MessageExt]] = {}
    lock = threading.Lock()

    def listener(messages: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        with lock:
            for message in messages:
                received.setdefault(message.properties.get("label", "?"), []).append(message)
        return ConsumeStatus.CONSUME_SUCCESS

    push = AsyncPushConsumer(
        unique("CG_aliprod"),
        scripts.server.namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    push.subscribe(topic, "TagA || TagZip")
    await push.start()
    try:
        script = await asyncio.to_thread(
            scripts.run, "ali_producer_send", timeout=60, topic=topic, group=unique("aliprod")
        )
        sent = {event["label"]: event for event in script.of_kind("sent")}
        check(script, set(sent) == {"plain", "zip", "skip", "last"}, f"sent {sorted(sent)}")

        def all_labels() -> bool:
            with lock:
                return {"plain", "zip", "last"} <= set(received)

        with contextlib.suppress(AssertionError):  # checked below, failing with the script
            await eventually(all_labels, "plain, zip and last", timeout=40)
    finally:
        await push.shutdown()

    with lock:
        got = dict(received)
    check(script, set(got) == {"plain", "zip", "last"}, f"received {sorted(got)}")
    for label, messages in got.items():
        check(script, len(messages) == 1, f"{label} delivered {len(messages)} times")
        message, event = messages[0], sent[label]
        check(script, message.topic == topic, f"{label}: topic {message.topic}")
        check(script, message.tags == event["tags"], f"{label}: tags {message.tags}")
        check(script, message.msg_id == event["msgId"], f"{label}: msg id {message.msg_id}")
        check(script, message.queue_id == event["queueId"], f"{label}: queue {message.queue_id}")
        check(
            script,
            message.queue_offset == int(event["queueOffset"]),
            f"{label}: offset {message.queue_offset}",
        )
        check(
            script,
            message.body == base64.b64decode(event["bodyB64"]),
            f"{label}: body of {len(message.body)} bytes differs",
        )
    plain = got["plain"][0]
    check(script, plain.keys == ["k1", "k2"], f"plain keys {plain.keys}")
    check(script, plain.flag == 3, f"plain flag {plain.flag}")
    check(script, plain.properties.get("color") == "red", f"plain properties {plain.properties}")
    check(
        script,
        plain.properties.get("spaced") == "a value with spaces",
        f"plain properties {plain.properties}",
    )
    zipped = got["zip"][0]
    check(script, len(zipped.body) == 6000, f"zip body {len(zipped.body)} bytes")
    check(script, zipped.keys == ["big"], f"zip keys {zipped.keys}")
