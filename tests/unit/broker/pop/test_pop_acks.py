"""BrokerPop's acks and changes of invisible time over the in-memory store, on
a manual clock: a FIFO ack follows RocketMQ's broker (AckMessageProcessor.
ackOrderly, ConsumerOrderInfoManager.commitAndNext): a late one commits while
nobody received the batch again, one for an earlier delivery or a committed
message changes nothing, one for an offset the batch does not hold is
refused; a FIFO change of invisible time keeps the delivery's pop time; a
non-FIFO change in the pop's own millisecond gets a checkpoint of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tidemq.broker.assembly import Features
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.pop.api import PoppedMessage, PopRequest, ReceiptHandleError
from tidemq.broker.pop.engine import BrokerPop
from tidemq.broker.pop.receipts import ReceiptHandle, parse_receipt_handle
from tidemq.broker.service import BrokerService, SendRequest
from tidemq.broker.topics import TopicConfig
from tidemq.common import properties as props
from tidemq.common.clock import ManualClock
from tidemq.testing.cores import memory_core

TOPIC = "PopT"
FIFO_GROUP = "FifoG"
GROUP = "PopG"


@dataclass
class Broker:
    service: BrokerService
    pop: BrokerPop
    clock: ManualClock


@pytest.fixture
async def broker(tmp_path: Path) -> Broker:
    core, _store, clock = memory_core(
        tmp_path, Features(delay=False, timers=False, transactions=False, pop=True)
    )
    service = core.service
    service.topics.update(TopicConfig(TOPIC, read_queue_nums=1, write_queue_nums=1))
    service.groups.update(SubscriptionGroupConfig(FIFO_GROUP, consume_message_orderly=True))
    service.groups.update(SubscriptionGroupConfig(GROUP))
    pop = core.pop_engine
    assert pop is not None
    for i in range(4):
        await core.send.send(
            SendRequest(
                producer_group="PG",
                topic=TOPIC,
                queue_id=0,
                body=f"m{i}".encode(),
                properties=props.encode_properties({props.SHARDING_KEY: "order-1"}),
                born_timestamp=clock.now_ms(),
            )
        )
    return Broker(service, pop, clock)


async def receive(broker: Broker, group: str, count: int = 2) -> list[PoppedMessage]:
    request = PopRequest(group=group, topic=TOPIC, max_nums=count, invisible_ms=1000)
    return (await broker.pop.pop(request)).messages


def offsets(messages: list[PoppedMessage]) -> list[tuple[int, int]]:
    return [(m.queue_offset, m.delivery_attempt) for m in messages]


async def ack(broker: Broker, group: str, message: PoppedMessage | str) -> None:
    handle = message if isinstance(message, str) else message.receipt_handle
    await broker.pop.ack(group, TOPIC, handle)


async def test_a_late_fifo_ack_commits_while_nobody_received_the_batch_again(
    broker: Broker,
) -> None:
    batch = await receive(broker, FIFO_GROUP)
    broker.clock.advance(5)  # well past the 1 s invisible time
    for message in batch:
        await ack(broker, FIFO_GROUP, message)
    assert broker.service.offsets.query(FIFO_GROUP, TOPIC, 0) == 2
    assert offsets(await receive(broker, FIFO_GROUP)) == [(2, 1), (3, 1)]
    # acks of messages committed already: done, nothing changes
    await ack(broker, FIFO_GROUP, batch[0])
    assert broker.service.offsets.query(FIFO_GROUP, TOPIC, 0) == 2


async def test_an_ack_of_an_earlier_delivery_changes_nothing(broker: Broker) -> None:
    first = await receive(broker, FIFO_GROUP)
    broker.clock.advance(2)
    again = await receive(broker, FIFO_GROUP)
    assert offsets(again) == [(0, 2), (1, 2)]
    for message in first:
        await ack(broker, FIFO_GROUP, message)  # answered, no effect
    assert await receive(broker, FIFO_GROUP) == [], "the second delivery still holds the queue"
    assert broker.service.offsets.query(FIFO_GROUP, TOPIC, 0) == 0
    for message in again:
        await ack(broker, FIFO_GROUP, message)
    assert broker.service.offsets.query(FIFO_GROUP, TOPIC, 0) == 2


async def test_a_fifo_ack_for_an_offset_outside_the_batch_is_refused(broker: Broker) -> None:
    [message] = await receive(broker, FIFO_GROUP, count=1)
    handle = parse_receipt_handle(message.receipt_handle)
    forged = ReceiptHandle(
        handle.start_offset,
        handle.pop_ms,
        handle.invisible_ms,
        0,
        0,
        handle.broker_name,
        0,
        3,
    )
    with pytest.raises(ReceiptHandleError, match="offset is illegal"):
        await ack(broker, FIFO_GROUP, forged.text())


async def test_a_fifo_change_of_invisible_time_keeps_the_pop_time(broker: Broker) -> None:
    [first, second] = await receive(broker, FIFO_GROUP)
    broker.clock.advance(0.5)
    renewed = await broker.pop.change_invisible(FIFO_GROUP, TOPIC, first.receipt_handle, 10_000)
    before, after = parse_receipt_handle(first.receipt_handle), parse_receipt_handle(renewed)
    assert after.pop_ms == before.pop_ms
    assert after.due_ms == broker.clock.now_ms() + 10_000
    broker.clock.advance(5)  # past the first 1 s, within the new 10 s
    assert await receive(broker, FIFO_GROUP) == []
    await ack(broker, FIFO_GROUP, renewed)
    await ack(broker, FIFO_GROUP, second)  # the handle of the same delivery still acks
    assert broker.service.offsets.query(FIFO_GROUP, TOPIC, 0) == 2


async def test_a_change_in_the_pops_own_millisecond_gets_its_own_checkpoint(
    broker: Broker,
) -> None:
    [first, second] = await receive(broker, GROUP)
    renewed = await broker.pop.change_invisible(GROUP, TOPIC, first.receipt_handle, 5000)
    assert (
        parse_receipt_handle(renewed).pop_ms
        == parse_receipt_handle(first.receipt_handle).pop_ms + 1
    )
    await ack(broker, GROUP, second)
    broker.clock.advance(2)
    assert await broker.pop.revive_due() == 0  # the first is invisible for 5 s now
    await ack(broker, GROUP, renewed)
    broker.clock.advance(10)
    assert await broker.pop.revive_due() == 0
    assert broker.pop.pending_count() == 0
