from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from tidemq.broker.consumers import ClientChannel, ConsumerManager, ProducerManager
from tidemq.common.clock import ManualClock
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.heartbeat import ConsumerData, Subscription, parse_heartbeat

# The heartbeat ali-ons 3.12.0 sends (protocol-remoting.md §2.3).
ALI_ONS_HEARTBEAT = {
    "clientID": "192.0.2.2@21555",
    "consumerDataSet": [
        {
            "groupName": "CG_test",
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [
                {
                    "topic": "TopicTest",
                    "subString": "TagA || TagC",
                    "classFilterMode": False,
                    "tagsSet": ["TagA", "TagC"],
                    "codeSet": [2598919, 2598921],
                    "subVersion": 1795321339918,
                },
                {
                    "topic": "%RETRY%CG_test",
                    "subString": "*",
                    "classFilterMode": False,
                    "tagsSet": [],
                    "codeSet": [],
                    "subVersion": 1795321339918,
                },
            ],
            "unitMode": False,
        }
    ],
    "producerDataSet": [{"groupName": "PG_test"}],
}


@dataclass(eq=False)
class FakeConnection:
    id: int
    remote: tuple[str, int] = ("127.0.0.1", 5555)
    closed: bool = False
    pushed: list[RemotingCommand] = field(default_factory=list)

    def send(self, command: RemotingCommand) -> None:
        self.pushed.append(command)

    def send_oneway(self, command: RemotingCommand) -> None:
        self.pushed.append(command)

    def close(self) -> None:
        self.closed = True


def test_parse_the_ali_ons_heartbeat() -> None:
    data = parse_heartbeat(json.dumps(ALI_ONS_HEARTBEAT).encode())
    assert data.client_id == "192.0.2.2@21555"
    assert data.producer_groups == ("PG_test",)
    (consumer,) = data.consumers
    assert consumer.group_name == "CG_test"
    assert consumer.message_model == "CLUSTERING"
    first = consumer.subscriptions[0]
    assert first.sub_string == "TagA || TagC"
    assert first.code_set == (2598919, 2598921)
    assert first.expression_type == "TAG"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b"{}", "clientID"),
        (b'{"clientID":"c","consumerDataSet":{}}', "must be a list"),
        (b'{"clientID":"c","consumerDataSet":[{"x":1}]}', "groupName"),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{}]}]}',
            "topic",
        ),
    ],
)
def test_bad_heartbeats_say_why(body: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_heartbeat(body)


def consumer(group: str, *topics: str) -> ConsumerData:
    return ConsumerData(group, subscriptions=tuple(Subscription(t) for t in topics))


def test_membership_changes_notify_the_group() -> None:
    events: list[tuple[str, list[str]]] = []

    def on_change(group: str, channels: list[ClientChannel]) -> None:
        events.append((group, sorted(ch.client_id for ch in channels)))

    manager = ConsumerManager(clock=ManualClock(), on_change=on_change)
    one, two = FakeConnection(1), FakeConnection(2)
    assert manager.register(consumer("G", "T"), "c1", one)
    assert not manager.register(consumer("G", "T"), "c1", one)  # a refresh changes nothing
    assert manager.register(consumer("G", "T"), "c2", two)
    assert manager.client_ids("G") == ["c1", "c2"]
    assert manager.register(consumer("G", "T", "U"), "c2", two)  # new subscription
    assert manager.find_subscription("G", "U") is not None
    assert manager.unregister("G", "c1")
    assert not manager.unregister("G", "c1")
    assert events == [("G", ["c1"]), ("G", ["c1", "c2"]), ("G", ["c1", "c2"]), ("G", ["c2"])]
    assert manager.connection_closed(two) == ["G"]
    assert manager.get("G") is None
    assert manager.client_ids("G") == []


def test_consumers_expire_after_120_seconds_without_heartbeat() -> None:
    clock = ManualClock()
    manager = ConsumerManager(clock=clock, expiry_s=120)
    quiet, chatty = FakeConnection(1), FakeConnection(2)
    manager.register(consumer("G", "T"), "quiet", quiet)
    manager.register(consumer("G", "T"), "chatty", chatty)
    clock.advance(100)
    manager.register(consumer("G", "T"), "chatty", chatty)
    clock.advance(20)
    assert manager.scan_expired() == []
    clock.advance(1)
    (expired,) = manager.scan_expired()
    assert expired.client_id == "quiet"
    assert manager.client_ids("G") == ["chatty"]
    assert manager.client_ids_on(chatty) == {"chatty"}
    clock.advance(200)
    assert [c.client_id for c in manager.scan_expired()] == ["chatty"]
    assert manager.groups() == []


def test_a_client_moving_to_a_new_connection_counts_as_joining() -> None:
    manager = ConsumerManager(clock=ManualClock())
    old, new = FakeConnection(1), FakeConnection(2)
    manager.register(consumer("G", "T"), "c", old)
    assert manager.register(consumer("G", "T"), "c", new)
    assert manager.connection_closed(old) == []
    assert manager.client_ids("G") == ["c"]


def test_producers() -> None:
    clock = ManualClock()
    producers = ProducerManager(clock=clock, expiry_s=120)
    connection = FakeConnection(1)
    producers.register("PG", "p1", connection)
    assert [m.client_id for m in producers.members("PG")] == ["p1"]
    assert producers.uses(connection)
    clock.advance(121)
    assert [m.client_id for m in producers.scan_expired()] == ["p1"]
    producers.register("PG", "p1", connection)
    producers.connection_closed(connection)
    assert producers.groups() == []
    producers.register("PG", "p2", connection)
    assert producers.unregister("PG", "p2") and not producers.unregister("PG", "p2")
