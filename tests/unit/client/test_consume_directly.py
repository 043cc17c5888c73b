"""consume_directly: the listener once over one message, and Java's
ConsumeMessageDirectlyResult for what it returned or raised (pure, no broker)."""

from __future__ import annotations

from typing import Any

import pytest

from tidemq.client.consumer.direct import consume_directly, direct_result
from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
)
from tidemq.common import properties as props
from tidemq.common.clock import ManualClock
from tidemq.common.message import MessageExt


def retry_copy() -> MessageExt:
    message = MessageExt(topic="%RETRY%G", body=b"x", queue_id=2)
    message.properties[props.RETRY_TOPIC] = "Orders"
    return message


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (ConsumeStatus.CONSUME_SUCCESS, "CR_SUCCESS"),
        (ConsumeStatus.RECONSUME_LATER, "CR_LATER"),
        (ConsumeOrderlyStatus.SUCCESS, "CR_SUCCESS"),
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, "CR_LATER"),
        (None, "CR_RETURN_NULL"),
    ],
)
def test_outcomes(outcome: object, expected: str) -> None:
    result = direct_result(outcome, orderly=False, spent_ms=3)
    assert result == {
        "order": False,
        "autoCommit": True,
        "consumeResult": expected,
        "remark": None,
        "spentTimeMills": 3,
    }


async def test_a_sync_listener_sees_the_original_topic_once() -> None:
    calls: list[tuple[list[str], Any]] = []

    def listener(messages: list[MessageExt], context: Any) -> ConsumeStatus:
        calls.append(([m.topic for m in messages], context))
        return ConsumeStatus.CONSUME_SUCCESS

    result = await consume_directly(
        listener, retry_copy(), "G", "broker-a", orderly=False, clock=ManualClock()
    )
    assert result["consumeResult"] == "CR_SUCCESS"
    ((topics, context),) = calls
    assert topics == ["Orders"]
    assert isinstance(context, ConsumeConcurrentlyContext)
    assert (context.mq.broker_name, context.mq.queue_id) == ("broker-a", 2)


async def test_an_async_orderly_listener_that_raises() -> None:
    async def listener(messages: list[MessageExt], context: Any) -> ConsumeOrderlyStatus:
        assert isinstance(context, ConsumeOrderlyContext)
        raise ValueError("bad payload")

    result = await consume_directly(
        listener, retry_copy(), "G", "broker-a", orderly=True, clock=ManualClock()
    )
    assert result["consumeResult"] == "CR_THROW_EXCEPTION" and result["order"] is True
    assert result["remark"] == "ValueError: bad payload"
