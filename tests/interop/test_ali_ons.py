"""The real `ali-ons` 3.12.0 Node client (pure JS, RocketMQ 4.x remoting protocol)
against a real `tidemq serve`.

Each test runs one script from `js/` (see `js/_common.js` for the JSON-lines contract)
on its own topic and group, then checks what the script saw: send results and
deliveries. Scenarios follow shared/design/protocol-remoting.md §8.2; the retry and
dead-letter ones wait for RocketMQ's real delays (level 3 = 10 s, level 4 = 30 s).
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
from collections import Counter
from typing import Any

import pytest
from ali_ons_harness import Event, NodeScript, ScriptRunner, TidemqServer, unique

from tidemq.testing.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("node") is None,
        reason="`node` is not installed: the ali-ons interop tests need Node.js >= 18",
    ),
]

MSG_ID = re.compile(r"^[0-9A-F]{32}$")
QUEUES = 4
ALL_QUEUES = set(range(QUEUES))


# -- helpers ------------------------------------------------------------------------------
def new_topic(server: TidemqServer, scenario: str) -> str:
    topic = unique(f"IT_{scenario}")
    server.create_topic(topic, queues=QUEUES)
    return topic


def by_label(events: list[Event]) -> dict[str, Event]:
    out: dict[str, Event] = {}
    for event in events:
        assert event["label"] not in out, f"label {event['label']} sent twice: {event}"
        out[event["label"]] = event
    return out


def check(script: NodeScript, condition: bool, message: str) -> None:
    """`assert` with the script's events, stderr and the server log in the report."""
    if not condition:
        script.fail(message)


def check_sends(script: NodeScript, topic: str) -> dict[str, Event]:
    sent = by_label(script.of_kind("sent"))
    for label, event in sent.items():
        check(script, event["sendStatus"] == "SEND_OK", f"{label}: sendStatus {event}")
        check(script, bool(MSG_ID.match(str(event["msgId"]))), f"{label}: msgId {event['msgId']!r}")
        check(script, event["topic"] == topic, f"{label}: send result topic {event['topic']!r}")
        check(script, event["queueId"] in ALL_QUEUES, f"{label}: queueId {event['queueId']}")
        check(script, event["queueOffset"] >= 0, f"{label}: queueOffset {event['queueOffset']}")
    ids = [event["msgId"] for event in sent.values()]
    check(script, len(set(ids)) == len(ids), f"duplicate msgIds in send results: {ids}")
    return sent


def check_first_delivery(script: NodeScript, got: Event, sent: Event, topic: str) -> None:
    """A first (not retried) delivery matches its send result field by field."""
    label = sent["label"]
    expected: dict[str, Any] = {
        "msgId": sent["msgId"],
        "topic": topic,
        "tags": sent["tags"],
        "keys": sent["keys"],
        "queueId": sent["queueId"],
        "queueOffset": sent["queueOffset"],
        "reconsumeTimes": 0,
        "flag": sent["flag"],
        "bodyLength": sent["bodyLength"],
        "bodySha256": sent["bodySha256"],
        "originMessageId": None,
        "retryTopic": None,
    }
    for key, value in expected.items():
        check(script, got[key] == value, f"{label}: delivered {key}={got[key]!r}, want {value!r}")
    check(
        script, got["properties"].get("label") == label, f"{label}: properties {got['properties']}"
    )


def deliveries_of(script: NodeScript, who: str | None = None) -> list[Event]:
    return [e for e in script.of_kind("received") if who is None or e["who"] == who]


def check_closed(script: NodeScript, *who: str) -> None:
    closed = {e["who"]: e for e in script.of_kind("closed")}
    for name in who:
        event = closed.get(name)
        check(
            script,
            event is not None and event["ok"],
            f"{name}.close() failed (UNREGISTER_CLIENT must answer 0): {event}",
        )


def final_assignment(script: NodeScript) -> dict[str, list[int]]:
    assigned = script.of_kind("assigned")
    check(script, bool(assigned), "no queue assignment reported")
    queues: dict[str, list[int]] = assigned[-1]["queues"]
    return queues


def check_each_queue_has_one(script: NodeScript, events: list[Event], what: str) -> None:
    """Four consecutive round-robin sends cover the four queues once each."""
    queues = sorted(e["queueId"] for e in events)
    check(script, queues == sorted(ALL_QUEUES), f"{what} landed on queues {queues}, want 0..3")


# -- scenarios ----------------------------------------------------------------------------
def test_produce_consume_with_tag_filter(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Tags")
    group = unique("CG_tags")
    script = scripts.run("tags", timeout=60, topic=topic, group=group)

    sent = check_sends(script, topic)
    sharded = ["b1", "a1", "c1", "b2", "a2", "c2"]
    check(script, len({sent[x]["queueId"] for x in sharded}) == 1, "sharded sends spread out")
    offsets = [sent[x]["queueOffset"] for x in sharded]
    check(script, offsets == sorted(offsets) and len(set(offsets)) == 6, f"offsets {offsets}")
    check_each_queue_has_one(script, [sent[x] for x in ("a3", "c3", "a4", "c4")], "a3..c4")

    got = deliveries_of(script)
    labels = Counter(e["label"] for e in got)
    want = ["a1", "c1", "a2", "c2", "a3", "c3", "a4", "c4"]
    check(script, labels == Counter(want), f"delivered {dict(labels)}, want each of {want} once")
    check(script, all(e["tags"] in ("TagA", "TagC") for e in got), "a TagB message was delivered")
    for event in got:
        check_first_delivery(script, event, sent[event["label"]], topic)
        check(script, event["body"] == f"body of {event['label']}", f"body {event['body']!r}")
        check(script, event["sysFlag"] & 1 == 0, f"small body marked compressed: {event}")
    sharded_queue = sent["a1"]["queueId"]
    order = [e["queueOffset"] for e in got if e["queueId"] == sharded_queue]
    check(script, order == sorted(order), f"queue {sharded_queue} delivered out of order: {order}")
    check_closed(script, "consumer", "producer")


def test_compressed_body_keys_properties_and_flag(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Body")
    script = scripts.run("body_props", timeout=60, topic=topic, group=unique("CG_body"))

    sent = check_sends(script, topic)
    got = by_label(deliveries_of(script))
    check(script, set(got) == {"big", "small"}, f"delivered {sorted(got)}")
    for label in ("big", "small"):
        check_first_delivery(script, got[label], sent[label], topic)
        check(script, got[label]["bodyB64"] == sent[label]["bodyB64"], f"{label}: body differs")

    big, small = got["big"], got["small"]
    check(script, len(base64.b64decode(big["bodyB64"])) == 6000, "big body length")
    check(script, big["sysFlag"] & 1 == 1, f"big body not compressed: {big['sysFlag']}")
    check(script, big["keys"] == "k1 k2", f"keys {big['keys']!r}")
    check(script, big["flag"] == 7, f"flag {big['flag']}")
    want_props = {"custom": "v", "spaced": "a value with spaces", "label": "big"}
    check(script, big["properties"] == want_props, f"properties {big['properties']}")
    check(script, small["sysFlag"] & 1 == 0, f"small sysFlag {small['sysFlag']}")
    check(script, small["body"] == "hello, tidemq", f"small body {small['body']!r}")
    check(script, small["keys"] == "only" and small["flag"] == 0, f"small: {small}")
    check(script, small["properties"] == {"custom": "w", "label": "small"}, "small properties")
    check_closed(script, "consumer", "producer")


def test_failed_message_is_redelivered_from_the_retry_topic(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Retry")
    script = scripts.run("retry", timeout=60, topic=topic, group=unique("CG_retry"), mode="first")

    sent = check_sends(script, topic)["r1"]
    got = deliveries_of(script)
    check(script, [e["reconsumeTimes"] for e in got] == [0, 1], "want one failure, one retry")
    first, retry = got
    check_first_delivery(script, first, sent, topic)
    check(script, retry["originMessageId"] == sent["msgId"], f"originMessageId {retry}")
    check(script, retry["retryTopic"] == topic, f"retryTopic {retry['retryTopic']!r}")
    check(script, retry["topic"] == topic, f"handler saw topic {retry['topic']!r}")
    check(script, retry["msgId"] != sent["msgId"], "the retry must be a new record")
    check(script, retry["bodySha256"] == sent["bodySha256"], "retry body differs")
    check(script, retry["tags"] == "TagR", f"retry tags {retry['tags']!r}")
    check(script, retry["properties"].get("label") == "r1", f"retry props {retry['properties']}")
    gap = (retry["t"] - first["t"]) / 1000
    check(script, gap >= 9.0, f"retry after {gap:.1f} s; delay level 3 is 10 s")


def find_in_dlq(server: TidemqServer, group: str, key: str, timeout: float) -> dict[str, Any]:
    """Polls `tidemq message query --topic %DLQ%<group> --key KEY --json` (the DLQ is
    write-only, so it cannot be consumed) until the message shows up; returns it."""
    topic = f"%DLQ%{group}"
    tries: list[Any] = []

    def queried() -> dict[str, Any] | None:
        result = server.cli(
            "message",
            "query",
            "--topic",
            topic,
            "--key",
            key,
            "--namesrv",
            server.namesrv,
            "--json",
        )
        tries.append(result)
        if result.returncode != 0:
            return None
        found = json.loads(result.stdout)
        if isinstance(found, dict):
            found = [found]
        message: dict[str, Any] | None = found[0] if found else None
        return message

    try:  # a second between CLI runs: each is a new Python process
        return wait_until(queried, f"key {key} in {topic}", timeout=timeout, interval=1.0)
    except AssertionError:
        pytest.fail(
            f"no message with key {key} in {topic} within {timeout:.0f} s; last try:\n"
            f"{tries[-1].describe()}\n{server.describe()}",
            pytrace=False,
        )


@pytest.mark.timeout(120)
def test_dead_letter_after_max_reconsume_times(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Dlq")
    group = unique("CG_dlq")
    key = unique("dlqkey")
    script = scripts.start(
        "retry", timeout=110, topic=topic, group=group, mode="always", max_reconsume=2, key=key
    )
    script.wait_for(
        "the third delivery (reconsumeTimes 2)",
        lambda events: any(e["event"] == "received" and e["reconsumeTimes"] >= 2 for e in events),
        timeout=90,
    )
    dead = find_in_dlq(scripts.server, group, key, timeout=20)
    script.stop()
    script.wait_exit(15)

    sent = check_sends(script, topic)["r1"]
    got = deliveries_of(script)
    check(script, [e["reconsumeTimes"] for e in got] == [0, 1, 2], "want exactly 3 deliveries")
    check_first_delivery(script, got[0], sent, topic)
    for retry in got[1:]:
        check(script, retry["originMessageId"] == sent["msgId"], f"originMessageId {retry}")
        check(script, retry["retryTopic"] == topic, f"retryTopic {retry['retryTopic']!r}")
        check(script, retry["bodySha256"] == sent["bodySha256"], "retry body differs")
    gaps = [(b["t"] - a["t"]) / 1000 for a, b in itertools.pairwise(got)]
    check(script, gaps[0] >= 9.0 and gaps[1] >= 28.0, f"retry gaps {gaps}; levels 3, 4: 10 s, 30 s")
    check(script, dead.get("topic") == f"%DLQ%{group}", f"DLQ message: {dead}")
    check(script, dead.get("body") == "body of r1", f"DLQ message body: {dead}")
    keys = dead.get("keys")
    check(script, key in (keys if isinstance(keys, list) else str(keys).split()), f"keys: {dead}")
    props = dead.get("properties") or {}
    check(script, props.get("ORIGIN_MESSAGE_ID") == sent["msgId"], f"DLQ origin id: {dead}")
    check(script, props.get("RETRY_TOPIC") == topic, f"DLQ RETRY_TOPIC: {dead}")
    check(script, props.get("TAGS") == "TagR" and props.get("label") == "r1", f"DLQ props: {dead}")


def test_restarted_consumer_resumes_from_committed_offset(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Resume")
    group = unique("CG_resume")
    first = scripts.run("offset_resume", timeout=60, topic=topic, group=group, phase="first")
    first_sent = check_sends(first, topic)
    check(first, set(first_sent) == {f"first-{i}" for i in range(4)}, "phase 1 sends")
    first_got = Counter(e["label"] for e in deliveries_of(first))
    check(first, first_got == Counter(first_sent.keys()), f"phase 1 delivered {dict(first_got)}")
    check_closed(first, "consumer", "producer")

    second = scripts.run("offset_resume", timeout=60, topic=topic, group=group, phase="second")
    second_sent = check_sends(second, topic)
    # Each queue holds one phase-1 message below one phase-2 message, and ali-ons handles
    # a queue in offset order: had the new consumer started before its committed offset,
    # the phase-1 message would have been delivered before the phase-2 one.
    check_each_queue_has_one(first, list(first_sent.values()), "phase 1")
    check_each_queue_has_one(second, list(second_sent.values()), "phase 2")
    first_offsets = {e["queueId"]: e["queueOffset"] for e in first_sent.values()}
    for event in second_sent.values():
        below = first_offsets[event["queueId"]]
        check(second, event["queueOffset"] > below, f"phase 2 offset not above phase 1: {event}")
    got = deliveries_of(second)
    labels = Counter(e["label"] for e in got)
    check(second, labels == Counter(second_sent.keys()), f"restarted consumer got {dict(labels)}")
    for event in got:
        check_first_delivery(second, event, second_sent[event["label"]], topic)
    check_closed(second, "consumer", "producer")


def test_two_consumers_of_one_group_split_the_queues(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Balance")
    script = scripts.run("load_balance", timeout=80, topic=topic, group=unique("CG_lb"), count=16)

    sent = check_sends(script, topic)
    assignment = final_assignment(script)
    c1, c2 = set(assignment["c1"]), set(assignment["c2"])
    check(script, len(c1) == 2 and len(c2) == 2 and c1 | c2 == ALL_QUEUES, f"split {assignment}")
    got = deliveries_of(script)
    labels = Counter(e["label"] for e in got)
    check(
        script, labels == Counter(sent.keys()), f"want each of 16 once overall, got {dict(labels)}"
    )
    for event in got:
        owned = c1 if event["who"] == "c1" else c2
        check(script, event["queueId"] in owned, f"{event['who']} got a queue it does not own")
        check_first_delivery(script, event, sent[event["label"]], topic)
    for who, owned in (("c1", c1), ("c2", c2)):
        want = sum(1 for e in sent.values() if e["queueId"] in owned)
        have = len(deliveries_of(script, who))
        check(script, have == want and have > 0, f"{who} got {have}, its queues hold {want}")
    check_closed(script, "c1", "c2", "producer")


def test_broadcasting_consumers_each_get_every_message(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Bcast")
    script = scripts.run("broadcast", timeout=60, topic=topic, group=unique("CG_bc"), count=8)

    sent = check_sends(script, topic)
    assignment = final_assignment(script)
    for who in ("b1", "b2"):
        check(script, set(assignment[who]) == ALL_QUEUES, f"{who} pulls {assignment[who]}")
        got = deliveries_of(script, who)
        labels = Counter(e["label"] for e in got)
        check(
            script, labels == Counter(sent.keys()), f"{who} got {dict(labels)}, want each of 8 once"
        )
        for event in got:
            check_first_delivery(script, event, sent[event["label"]], topic)
    check_closed(script, "b1", "b2", "producer")


def test_new_group_consumes_from_timestamp(scripts: ScriptRunner) -> None:
    topic = new_topic(scripts.server, "Stamp")
    script = scripts.run("consume_from_timestamp", timeout=60, topic=topic, group=unique("CG_ts"))

    sent = check_sends(script, topic)
    before = [e for label, e in sent.items() if label.startswith("before-")]
    after = {label: e for label, e in sent.items() if label.startswith("after-")}
    # One "before" message under one "after" message in each queue: a consumer that
    # started below the timestamp would have been handed the "before" one first.
    check_each_queue_has_one(script, before, "before-*")
    check_each_queue_has_one(script, list(after.values()), "after-*")
    boundary = script.of_kind("boundary")[0]["boundaryMs"]
    got = deliveries_of(script)
    labels = Counter(e["label"] for e in got)
    check(script, labels == Counter(after.keys()), f"delivered {dict(labels)}, want only after-*")
    for event in got:
        check_first_delivery(script, event, after[event["label"]], topic)
        check(script, event["storeTimestamp"] >= boundary, f"stored before boundary: {event}")
    check_closed(script, "consumer", "producer")


def test_send_to_unknown_topic_is_rejected_with_code_17(scripts: ScriptRunner) -> None:
    topic = unique("IT_NoSuchTopic")  # deliberately never created
    script = scripts.run("unknown_topic", timeout=30, topic=topic, group=unique("PG_unknown"))

    check(script, not script.of_kind("sent"), "a send to an unknown topic succeeded")
    errors = script.of_kind("send_error")
    check(script, len(errors) == 1, "want one rejected send")
    error = errors[0]
    check(script, error["name"] == "MQClientException", f"error name {error['name']!r}")
    check(script, error["code"] == 17, f"error code {error['code']!r} (want 17 TOPIC_NOT_EXIST)")
