"""What the clients record: the trace records of a send, a transaction's end
and a consumption, built as Java's trace hooks build them (apache/rocketmq
client/.../trace/hook/SendMessageTraceHookImpl.java,
EndTransactionTraceHookImpl.java, ConsumeMessageTraceHookImpl.java) and handed
to a TraceDispatcher. Every method is cheap, never raises into the caller's
send or listener (a failure is logged), and may run on any thread.

Where tidemq differs, and why:

* a batch send records one Pub per message, each under its own msgId, where
  Java records one Pub for the whole batch under the ids joined by "," (which
  no msgId query finds);
* a timer message (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) is a
  Delay_Msg, as a delay level or __STARTDELIVERTIME is in Java;
* nothing on the trace topic is traced, consumed or sent (Java skips sends only).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence

from tidemq.client.consumer.listener import CONSUME_CONTEXT_TYPE, ConsumeHookContext
from tidemq.client.model import SendResult, SendStatus
from tidemq.client.trace.dispatcher import TraceDispatcher, TraceEntry
from tidemq.client.trace.records import (
    DEFAULT_REGION,
    ConsumeReturnType,
    EndTransactionRecord,
    PubRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceMessageType,
)
from tidemq.common import properties as props
from tidemq.common.clock import Clock
from tidemq.common.message import Message, MessageExt

__all__ = [
    "ConsumeTracer",
    "SendTracer",
    "message_type_of",
    "new_request_id",
]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1
_REQUEST_ID = "tidemq.trace.requestId"
_STARTED_MS = "tidemq.trace.timestamp"
_DELAY_KEYS = frozenset(
    {
        props.DELAY,
        props.START_DELIVER_TIME,
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
    }
)


def _cost(elapsed_ms: int) -> int:
    """A cost as the int Java writes: never negative (a clock that stepped back),
    at most Integer.MAX_VALUE."""
    return min(max(0, elapsed_ms), _INT_MAX)


def new_request_id() -> str:
    """A fresh id pairing a SubBefore with its SubAfter (Java: a new unique message id)."""
    return uuid.uuid4().hex.upper()


def message_type_of(message: Message) -> TraceMessageType:
    """As DefaultMQProducerImpl.sendKernelImpl sets the hook's message type."""
    properties = message.properties
    if not _DELAY_KEYS.isdisjoint(properties):
        return TraceMessageType.DELAY
    if properties.get(props.TRAN_MSG) == "true":
        return TraceMessageType.TRANS_HALF
    return TraceMessageType.NORMAL


def _region(message: Message) -> str:
    return message.properties.get(props.MSG_REGION) or DEFAULT_REGION


def _consume_region(traced: Sequence[MessageExt]) -> str | None:
    """The region of one consumption's records, None: write none.

    ConsumeMessageTraceHookImpl.consumeMessageBefore sets the context's
    regionId from each traced message's MSG_REGION in turn (so the last one
    counts, absent or not), and AsyncTraceDispatcher.AsyncAppenderRequest.
    sendTraceData skips a context whose regionId is null; the SubAfter takes
    the SubBefore's region, so it goes too. Brokers (Java's, tidemq's) stamp
    MSG_REGION on every message stored from a send."""
    return traced[-1].properties.get(props.MSG_REGION)


def _keys(message: Message) -> str | None:
    return message.properties.get(props.KEYS)


class _Tracer:
    def __init__(self, dispatcher: TraceDispatcher, clock: Clock) -> None:
        self.dispatcher = dispatcher
        self.clock = clock

    @property
    def trace_topic(self) -> str:
        return self.dispatcher.trace_topic

    def traces(self, topic: str) -> bool:
        """False for the trace topic itself (Java: any topic starting with its name)."""
        return not topic.startswith(self.dispatcher.trace_topic)


class SendTracer(_Tracer):
    """The Pub and EndTransaction records of one producer group.

    `broker_address(broker_name)` is the master a send went to (the record's
    store host)."""

    def __init__(
        self,
        dispatcher: TraceDispatcher,
        group: str,
        clock: Clock,
        broker_address: Callable[[str], str | None],
    ) -> None:
        super().__init__(dispatcher, clock)
        self.group = group
        self._broker_address = broker_address

    def sent(self, message: Message, body_length: int, result: SendResult, started_ms: int) -> None:
        """A send the broker answered; `body_length` as sent (compressed or not),
        `started_ms` when the send began."""
        if not (result.trace_on and self.traces(result.topic)):
            return  # the broker turned tracing off (TRACE_ON=false), as Java honours
        try:
            record = self._pub(message, body_length, result, started_ms, result.msg_id)
            self.dispatcher.append(TraceEntry(result.topic, (record,)))
        except Exception:
            log.exception("%s: tracing a send failed", self.group)

    def sent_batch(self, messages: Sequence[Message], result: SendResult, started_ms: int) -> None:
        """A batch the broker stored: one Pub per message."""
        if not (result.trace_on and self.traces(result.topic)):
            return
        try:
            ids = result.msg_id.split(",")
            offset_ids = result.offset_msg_id.split(",")
            records = []
            for index, message in enumerate(messages):
                msg_id = ids[index] if len(ids) == len(messages) else message.unique_key or ""
                offset_id = offset_ids[index] if len(offset_ids) == len(messages) else ""
                records.append(
                    self._pub(message, len(message.body), result, started_ms, msg_id, offset_id)
                )
            self.dispatcher.append(TraceEntry(result.topic, tuple(records)))
        except Exception:
            log.exception("%s: tracing a batch send failed", self.group)

    def _pub(
        self,
        message: Message,
        body_length: int,
        result: SendResult,
        started_ms: int,
        msg_id: str,
        offset_msg_id: str | None = None,
    ) -> PubRecord:
        return PubRecord(
            timestamp_ms=started_ms,
            region_id=result.region_id or DEFAULT_REGION,
            group=self.group,
            topic=result.topic,
            msg_id=msg_id,
            tags=message.tags,
            keys=_keys(message),
            store_host=self._broker_address(result.broker_name) or "",
            body_length=body_length,
            cost_ms=_cost(self.clock.now_ms() - started_ms),
            msg_type=message_type_of(message),
            offset_msg_id=result.offset_msg_id if offset_msg_id is None else offset_msg_id,
            success=result.status is SendStatus.SEND_OK,
        )

    def transaction_ended(
        self,
        message: Message,
        msg_id: str,
        transaction_id: str | None,
        state: str,
        *,
        from_check: bool,
        broker_address: str,
    ) -> None:
        """END_TRANSACTION about to be sent for `message` (state: a LocalTransactionState name)."""
        if not self.traces(message.topic):
            return
        try:
            record = EndTransactionRecord(
                timestamp_ms=self.clock.now_ms(),
                region_id=_region(message),
                group=self.group,
                topic=message.topic,
                msg_id=msg_id,
                tags=message.tags,
                keys=_keys(message),
                store_host=broker_address,
                msg_type=TraceMessageType.TRANS_COMMIT,  # whatever the state, as Java
                transaction_id=transaction_id,
                transaction_state=state,
                from_transaction_check=from_check,
            )
            self.dispatcher.append(TraceEntry(message.topic, (record,)))
        except Exception:
            log.exception("%s: tracing the end of a transaction failed", self.group)


class ConsumeTracer(_Tracer):
    """A ConsumeHook writing SubBefore/SubAfter records, and the lite pull
    consumer's `polled` (Java traces a poll as a call that succeeded at once)."""

    def _traced(self, messages: Sequence[MessageExt]) -> list[MessageExt]:
        return [
            m
            for m in messages
            if m.properties.get(props.TRACE_ON) != "false" and self.traces(m.topic)
        ]

    def _before(
        self,
        group: str,
        traced: Sequence[MessageExt],
        region: str,
        request_id: str,
        now_ms: int,
    ) -> None:
        records = tuple(
            SubBeforeRecord(
                timestamp_ms=now_ms,
                region_id=region,
                group=group,
                request_id=request_id,
                msg_id=m.unique_key or m.msg_id,
                retry_times=m.reconsume_times,
                keys=_keys(m),
            )
            for m in traced
        )
        self.dispatcher.append(TraceEntry(traced[0].topic, records))

    def _after(
        self,
        group: str,
        traced: Sequence[MessageExt],
        request_id: str,
        cost_ms: int,
        success: bool,
        code: int,
        now_ms: int,
    ) -> None:
        records = tuple(
            SubAfterRecord(
                request_id=request_id,
                msg_id=m.unique_key or m.msg_id,
                cost_ms=cost_ms,
                success=success,
                keys=_keys(m),
                context_code=code,
                timestamp_ms=now_ms,
                group=group,
            )
            for m in traced
        )
        self.dispatcher.append(TraceEntry(traced[0].topic, records))

    # -- ConsumeHook ------------------------------------------------------------------

    def consume_message_before(self, context: ConsumeHookContext) -> None:
        traced = self._traced(context.messages)
        region = _consume_region(traced) if traced else None
        if region is None:
            return  # no SubBefore, hence no SubAfter (no request id below)
        request_id, now_ms = new_request_id(), self.clock.now_ms()
        context.properties[_REQUEST_ID] = request_id
        context.properties[_STARTED_MS] = str(now_ms)
        self._before(context.group, traced, region, request_id, now_ms)

    def consume_message_after(self, context: ConsumeHookContext) -> None:
        request_id = context.properties.get(_REQUEST_ID)
        started = context.properties.get(_STARTED_MS)
        traced = self._traced(context.messages)
        if request_id is None or started is None or not traced:
            return
        now_ms = self.clock.now_ms()
        cost_ms = _cost((now_ms - int(started)) // len(context.messages))
        kind = context.properties.get(CONSUME_CONTEXT_TYPE, "")
        code = ConsumeReturnType[kind] if kind in ConsumeReturnType.__members__ else 0
        self._after(context.group, traced, request_id, cost_ms, context.success, code, now_ms)

    # -- lite pull ----------------------------------------------------------------------

    def polled(self, group: str, messages: Sequence[MessageExt]) -> None:
        """A batch `poll` returned: SubBefore and SubAfter (success) at once."""
        try:
            traced = self._traced(messages)
            region = _consume_region(traced) if traced else None
            if region is None:
                return
            request_id, now_ms = new_request_id(), self.clock.now_ms()
            self._before(group, traced, region, request_id, now_ms)
            self._after(group, traced, request_id, 0, True, ConsumeReturnType.SUCCESS, now_ms)
        except Exception:
            log.exception("%s: tracing a poll failed", group)
