"""What POP shows on /metrics: deliveries per (topic, group, retry), the
messages popped and not acked, the revive lag, dead letters; and the lag rows
of a POP group (tidemq.broker.lag), over the in-memory store on a manual clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tidemq.broker.assembly import BrokerCore, Features
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.lag import LagSources, consumer_lag
from tidemq.broker.pop.api import PoppedMessage, PopRequest
from tidemq.broker.pop.engine import BrokerPop
from tidemq.broker.service import SendRequest
from tidemq.broker.topics import TopicConfig
from tidemq.common.clock import ManualClock
from tidemq.testing.cores import memory_core

TOPIC = "PopT"
GROUP = "PopG"


@dataclass
class Broker:
    core: BrokerCore
    pop: BrokerPop
    clock: ManualClock


@pytest.fixture
async def broker(tmp_path: Path) -> Broker:
    features = Features(delay=False, timers=False, transactions=False, pop=True)
    core, _store, clock = memory_core(tmp_path, features, http_port=0)
    service = core.service
    service.topics.update(TopicConfig(TOPIC, read_queue_nums=1, write_queue_nums=1))
    service.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=1))
    assert core.pop_engine is not None
    for i in range(5):
        await core.send.send(SendRequest("PG", TOPIC, 0, f"m{i}".encode()))
    return Broker(core, core.pop_engine, clock)


async def receive(broker: Broker, count: int) -> list[PoppedMessage]:
    request = PopRequest(group=GROUP, topic=TOPIC, max_nums=count, invisible_ms=1000)
    return (await broker.pop.pop(request)).messages


def lag_rows(broker: Broker) -> dict[bool, tuple[int, int, int]]:
    service = broker.core.service
    sources = LagSources(
        service.store,
        service.topics,
        service.groups,
        service.offsets,
        service.consumers,
        service.stats,
        broker.pop,
    )
    return {
        row.is_retry: (row.lag, row.inflight, row.ready)
        for row in consumer_lag(sources, broker.clock.now_ms())
        if row.group == GROUP
    }


async def test_popped_messages_are_in_flight_until_acked(broker: Broker) -> None:
    popped = await receive(broker, 3)
    stats = broker.core.service.stats
    assert stats.pops[(TOPIC, GROUP, False)].messages == 3
    assert broker.pop.in_flight() == {(GROUP, TOPIC, 0, False): [0, 1, 2]}
    assert lag_rows(broker) == {False: (5, 3, 2), True: (0, 0, 0)}
    await broker.pop.ack(GROUP, TOPIC, popped[0].receipt_handle)
    assert lag_rows(broker)[False] == (4, 2, 2)


async def test_a_revive_due_and_not_done_is_revive_latency(broker: Broker) -> None:
    await receive(broker, 2)
    assert broker.pop.revive_lag(broker.clock.now_ms()) == (1, 0)  # the CK's journal record
    broker.clock.advance(3)  # due 1 s after the pop: 2 s late
    assert broker.pop.revive_lag(broker.clock.now_ms())[1] == 2_000
    await broker.pop.revive_due()
    assert broker.pop.revive_lag(broker.clock.now_ms())[1] == 0


async def test_revived_messages_show_in_the_retry_row_then_go_to_the_dlq(broker: Broker) -> None:
    await receive(broker, 2)
    broker.clock.advance(2)
    assert await broker.pop.revive_due() == 2  # copied into the POP retry topic
    assert lag_rows(broker)[True] == (2, 0, 2)
    retried = await receive(broker, 2)  # the retry topic is read first
    assert [m.delivery_attempt for m in retried] == [2, 2]
    assert broker.core.service.stats.pops[(TOPIC, GROUP, True)].messages == 2
    broker.clock.advance(2)
    await broker.pop.revive_due()  # retry_max_times=1: into the DLQ this time
    assert broker.core.service.stats.dead_letters == {(GROUP, TOPIC): 2}
