"""Consuming one given message at an operator's request (CONSUME_MESSAGE_DIRECTLY).

mqadmin and rocketmq-dashboard ask a broker to have one online consumer run its
listener over one stored message, and to say how it went; the broker forwards the
request with the message to the client (AdminBrokerProcessor.consumeMessageDirectly).
As Java's ConsumeMessageConcurrentlyService / ConsumeMessageOrderlyService
.consumeMessageDirectly: the listener is called once with that message alone, its
offsets and retries are left alone, and the answer is a ConsumeMessageDirectlyResult
(CR_SUCCESS, CR_LATER, CR_THROW_EXCEPTION, CR_RETURN_NULL, with the time spent).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tidemq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    is_async_listener,
)
from tidemq.client.consumer.send_back import restore_retry_topics
from tidemq.common.clock import Clock
from tidemq.common.message import MessageExt, MessageQueue

__all__ = ["consume_directly", "direct_result"]

_RESULTS: dict[object, str] = {
    ConsumeStatus.CONSUME_SUCCESS: "CR_SUCCESS",
    ConsumeStatus.RECONSUME_LATER: "CR_LATER",
    ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS",
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: "CR_LATER",
}


def direct_result(
    outcome: object, *, orderly: bool, spent_ms: int, error: BaseException | None = None
) -> dict[str, Any]:
    """The ConsumeMessageDirectlyResult JSON for what the listener returned (or raised)."""
    if error is not None:
        result, remark = "CR_THROW_EXCEPTION", f"{type(error).__name__}: {error}"[:500]
    elif outcome is None:
        result, remark = "CR_RETURN_NULL", None
    else:
        result, remark = _RESULTS.get(outcome, "CR_RETURN_NULL"), None
    return {
        "order": orderly,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark,
        "spentTimeMills": spent_ms,
    }


async def consume_directly(
    listener: Any,
    message: MessageExt,
    group: str,
    broker_name: str,
    *,
    orderly: bool,
    clock: Clock,
) -> dict[str, Any]:
    """Run `listener` over `message` alone, as it runs for `group` (a retry copy gets
    its original topic back); the ConsumeMessageDirectlyResult JSON."""
    restore_retry_topics([message], group)
    queue = MessageQueue(message.topic, broker_name, message.queue_id)
    context: object = ConsumeOrderlyContext(queue) if orderly else ConsumeConcurrentlyContext(queue)
    started = clock.monotonic()
    try:
        if is_async_listener(listener):
            outcome = await listener([message], context)
        else:
            outcome = await asyncio.to_thread(listener, [message], context)
    except Exception as exc:
        spent = int((clock.monotonic() - started) * 1000)
        return direct_result(None, orderly=orderly, spent_ms=spent, error=exc)
    spent = int((clock.monotonic() - started) * 1000)
    return direct_result(outcome, orderly=orderly, spent_ms=spent)
