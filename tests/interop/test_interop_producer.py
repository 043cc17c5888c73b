"""The tidemq Python producer against a real ali-ons (Node) push consumer: what a
tidemq producer sends (tags, keys, user properties, a compressed body over 4 KiB,
a delay level, sharding-key ordered messages) arrives intact and in order.

The consumer runs `js/tidemq_producer_consume.js`; the producer runs here, in the
test process, against the module's `tidemq serve`.
"""

from __future__ import annotations

import base64
import shutil
from typing import Any

import pytest
from ali_ons_harness import Event, NodeScript, ScriptRunner, unique

from tidemq.client.model import SendResult
from tidemq.client.producer import Producer, make_message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]

QUEUES = 4
EXPRESSION = "TagA || TagZip || TagDelay || TagOrder"
BIG_BODY = b"".join(bytes([i % 251, (i * 7) % 256]) * 8 + b"tidemq " for i in range(600))
ORDERED = 6


def check(script: NodeScript, condition: bool, message: str) -> None:
    if not condition:
        script.fail(message)


def deliveries_by_label(script: NodeScript) -> dict[str, Event]:
    found: dict[str, Event] = {}
    for event in script.of_kind("received"):
        label = event["label"]
        check(script, label not in found, f"{label} delivered twice")
        found[label] = event
    return found


def test_ali_ons_consumer_receives_what_the_tidemq_producer_sends(
    scripts: ScriptRunner,
) -> None:
    topic = unique("IT_PyProd")
    scripts.server.create_topic(topic, queues=QUEUES)
    script = scripts.start(
        "tidemq_producer_consume",
        timeout=90,
        topic=topic,
        group=unique("CG_pyprod"),
        expression=EXPRESSION,
    )
    script.wait_for("the subscription", lambda events: script.of_kind("subscribed"), 40)

    sent: dict[str, SendResult] = {}
    order_key = unique("order")
    with Producer(unique("PG_pyprod"), scripts.server.namesrv) as producer:

        def send(label: str, body: bytes, **options: Any) -> None:
            properties = {"label": label, **options.pop("properties", {})}
            sent[label] = producer.send(make_message(topic, body, properties=properties, **options))

        send(
            "plain",
            b"hello from tidemq",
            tags="TagA",
            keys=["k1", "k2"],
            flag=5,
            properties={"color": "blue", "spaced": "a value with spaces"},
        )
        send("zip", BIG_BODY, tags="TagZip", keys=["big"])
        send("delay", b"one second later", tags="TagDelay", delay_level=1)
        for step in range(ORDERED):
            label = f"ord{step}"
            message = make_message(
                topic, label.encode(), tags="TagOrder", properties={"label": label}
            )
            sent[label] = producer.send(message, sharding_key=order_key)
            if step == ORDERED // 2:
                skipped = make_message(
                    topic, b"not subscribed", tags="TagSkip", properties={"label": "skip"}
                )
                sent["skip"] = producer.send(skipped, sharding_key=order_key)

    wanted = set(sent) - {"skip"}
    script.wait_for(
        "every subscribed message",
        lambda events: wanted <= {e.get("label") for e in events if e["event"] == "received"},
        60,
    )
    script.stop()
    script.wait_exit(30)
    got = deliveries_by_label(script)
    check(script, set(got) == wanted, f"delivered {sorted(got)}, want {sorted(wanted)}")

    for label, result in sent.items():
        check(script, result.status == "SEND_OK", f"{label}: {result}")
        if label == "skip":
            continue
        event = got[label]
        check(script, event["topic"] == topic, f"{label}: topic {event['topic']}")
        check(script, event["reconsumeTimes"] == 0, f"{label}: reconsumed {event}")
        if label != "delay":  # a delayed message is stored again when due: new offset id
            check(script, event["msgId"] == result.offset_msg_id, f"{label}: msgId {event}")
            check(script, event["queueId"] == result.queue_id, f"{label}: queue {event}")

    plain = got["plain"]
    check(script, plain["body"] == "hello from tidemq", f"plain body {plain['body']!r}")
    check(script, plain["tags"] == "TagA", f"plain tags {plain['tags']!r}")
    check(script, plain["keys"] == "k1 k2", f"plain keys {plain['keys']!r}")
    check(script, plain["flag"] == 5, f"plain flag {plain['flag']}")
    want_props = {"label": "plain", "color": "blue", "spaced": "a value with spaces"}
    check(script, plain["properties"] == want_props, f"plain properties {plain['properties']}")
    for label, event in got.items():  # the broker's send stamp, as ali-ons reads it
        stamp = (event["msgRegion"], event["traceOn"])
        check(script, stamp == ("DefaultRegion", "true"), f"{label}: stamp {stamp}")
    check(script, plain["queueOffset"] == sent["plain"].queue_offset, "plain queue offset")
    check(script, plain["sysFlag"] & 1 == 0, f"small body marked compressed: {plain['sysFlag']}")

    big = got["zip"]
    check(script, base64.b64decode(big["bodyB64"]) == BIG_BODY, "the compressed body differs")
    check(script, big["sysFlag"] & 1 == 1, f"big body not marked compressed: {big['sysFlag']}")
    check(script, big["keys"] == "big", f"zip keys {big['keys']!r}")

    delayed = got["delay"]
    check(script, delayed["body"] == "one second later", f"delay body {delayed['body']!r}")
    waited = delayed["storeTimestamp"] - delayed["bornTimestamp"]
    check(script, waited >= 900, f"the delay-level-1 message was stored after {waited} ms")
    check(script, delayed["realTopic"] == topic, f"delayed realTopic {delayed['realTopic']}")

    ordered = [got[f"ord{step}"] for step in range(ORDERED)]
    queues = {e["queueId"] for e in ordered} | {sent["skip"].queue_id}
    check(script, len(queues) == 1, f"sharding-key messages spread over queues {queues}")
    offsets = [e["queueOffset"] for e in ordered]
    check(script, offsets == sorted(offsets), f"ordered offsets {offsets}")
    received_order = [
        e["label"] for e in script.of_kind("received") if e["label"].startswith("ord")
    ]
    want_order = [f"ord{step}" for step in range(ORDERED)]
    check(script, received_order == want_order, f"delivery order {received_order}")
