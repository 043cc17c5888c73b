"""PopProcessor: the POP codes, and what the gRPC receive and acks call.

=======  ===========================  ==================================================
code     request                      answer
=======  ===========================  ==================================================
200050   POP_MESSAGE                  SUCCESS + records (body as PULL's) and
                                      PopMessageResponseHeader; PULL_NOT_FOUND when
                                      nothing is visible after `pollTime`; POLLING_FULL
200051   ACK_MESSAGE                  SUCCESS; MESSAGE_ILLEGAL with the reason for a
                                      malformed, unknown, acked or expired extraInfo
200151   BATCH_ACK_MESSAGE            SUCCESS when every handle was accepted (body
                                      JSON {"acks": [{"consumerGroup", "topic",
                                      "extraInfo": [...]}]}, a tidemq simplification of
                                      Java's bitset form); else MESSAGE_ILLEGAL naming how
                                      many were refused (the accepted ones stay acked)
200053   CHANGE_MESSAGE_INVISIBLETIME SUCCESS + popTime/invisibleTime/reviveQid and the
                                      new handle in `extraInfo`
=======  ===========================  ==================================================

PEEK_MESSAGE, NOTIFICATION and POLLING_INFO are not served
(REQUEST_CODE_NOT_SUPPORTED). How a client rebuilds the receipt handle of
each popped record from the response header is documented on
`tidemq.protocol.pop_headers.PopMessageResponseHeader`.

The gRPC endpoint's ReceiveMessage, AckMessage, ChangeInvisibleDuration and
ForwardMessageToDeadLetterQueue call `pop`, `ack`, `change_invisible` and
`forward_to_dlq` here; every POP rule lives behind `PopHooks` (BrokerPop).
"""

from __future__ import annotations

import json

from tidemq.broker.pop.api import PopHooks, PopRequest, PopResult
from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.broker.remoting import RequestHandler
from tidemq.broker.requests import BrokerError
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import decode_header, encode_header
from tidemq.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from tidemq.transport import Connection

__all__ = ["PopProcessor", "pop_response_header"]

INIT_MODE_MAX = 1


def pop_response_header(result: PopResult) -> PopMessageResponseHeader:
    """The header Java clients read the batch's receipt handles from."""
    starts: dict[tuple[int, int], int] = {}
    offsets: dict[tuple[int, int], list[int]] = {}
    counts: list[str] = []
    for message in result.messages:
        handle = parse_receipt_handle(message.receipt_handle)
        key = (handle.topic_type, handle.queue_id)
        starts.setdefault(key, handle.start_offset)
        offsets.setdefault(key, []).append(handle.queue_offset)
        counts.append(
            f"{handle.topic_type} qo{handle.queue_id}%{handle.queue_offset} "
            f"{message.delivery_attempt - 1}"
        )
    return PopMessageResponseHeader(
        pop_time=result.pop_ms,
        invisible_time=result.invisible_ms,
        rest_num=result.rest_num,
        start_offset_info=";".join(f"{t} {q} {s}" for (t, q), s in starts.items()) or None,
        msg_offset_info=";".join(
            f"{t} {q} {','.join(map(str, o))}" for (t, q), o in offsets.items()
        )
        or None,
        order_count_info=";".join(counts) or None,
    )


class PopProcessor:
    """POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME
    over the broker's PopHooks (None: POP disabled, every call refused)."""

    def __init__(self, pop: PopHooks | None) -> None:
        self.engine = pop

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.POP_MESSAGE: self.handle_pop_message,
            RequestCode.ACK_MESSAGE: self.handle_ack_message,
            RequestCode.BATCH_ACK_MESSAGE: self.handle_batch_ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.handle_change_invisible_time,
        }

    def _enabled(self) -> PopHooks:
        if self.engine is None:
            raise BrokerError(ResponseCode.NO_PERMISSION, "pop consumption is disabled")
        return self.engine

    # -- remoting ------------------------------------------------------------------------

    async def handle_pop_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(PopMessageRequestHeader, request.ext_fields)
        result = await self.pop(
            PopRequest(
                group=header.consumer_group,
                topic=header.topic,
                max_nums=header.max_msg_nums,
                invisible_ms=header.invisible_time,
                queue_id=header.queue_id,
                poll_ms=header.poll_time,
                expression=header.exp,
                expression_type=header.exp_type or "TAG",
                order=header.order,
                init_mode_max=header.init_mode == INIT_MODE_MAX,
                attempt_id=header.attempt_id,
                client_host=f"{connection.remote[0]}:{connection.remote[1]}",
            )
        )
        ext = encode_header(pop_response_header(result))
        if result.messages:
            body = b"".join(m.record for m in result.messages)
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext, body)
        if result.polling_full:
            return RemotingCommand.response_to(
                request, ResponseCode.POLLING_FULL, "too many pops are held", ext
            )
        return RemotingCommand.response_to(
            request, ResponseCode.PULL_NOT_FOUND, "no new message", ext
        )

    async def handle_ack_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(AckMessageRequestHeader, request.ext_fields)
        _same_message(header.extra_info, header.queue_id, header.offset)
        await self.ack(header.consumer_group, header.topic, header.extra_info)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def handle_batch_ack_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        try:
            document = json.loads(request.body or b"{}")
            acks = [
                (str(a["consumerGroup"]), str(a["topic"]), [str(h) for h in a["extraInfo"]])
                for a in document["acks"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL, f"batch ack body is malformed: {exc}"
            ) from None
        refused = 0
        for group, topic, handles in acks:
            results = await self.batch_ack(group, topic, handles)
            refused += results.count(False)
        if refused:
            return RemotingCommand.response_to(
                request, ResponseCode.MESSAGE_ILLEGAL, f"{refused} receipt handles were refused"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def handle_change_invisible_time(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ChangeInvisibleTimeRequestHeader, request.ext_fields)
        _same_message(header.extra_info, header.queue_id, header.offset)
        new_handle = await self.change_invisible(
            header.consumer_group, header.topic, header.extra_info, header.invisible_time
        )
        handle = parse_receipt_handle(new_handle)
        ext = encode_header(
            ChangeInvisibleTimeResponseHeader(
                pop_time=handle.pop_ms,
                invisible_time=handle.invisible_ms,
                revive_qid=handle.revive_qid,
                extra_info=new_handle,
            )
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext)

    # -- both protocols ------------------------------------------------------------------

    async def pop(self, request: PopRequest) -> PopResult:
        """Pop visible messages, holding up to `request.poll_ms` (PopHooks.pop)."""
        return await self._enabled().pop(request)

    async def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        await self._enabled().ack(group, topic, receipt_handle)

    async def batch_ack(self, group: str, topic: str, receipt_handles: list[str]) -> list[bool]:
        return await self._enabled().batch_ack(group, topic, receipt_handles)

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int
    ) -> str:
        return await self._enabled().change_invisible(group, topic, receipt_handle, invisible_ms)

    async def forward_to_dlq(self, group: str, topic: str, receipt_handle: str) -> None:
        await self._enabled().forward_to_dlq(group, topic, receipt_handle)

    def is_fifo(self, group: str) -> bool:
        """Whether the group consumes in FIFO order; False when POP is disabled."""
        return self.engine is not None and self.engine.is_fifo(group)


def _same_message(extra_info: str, queue_id: int, offset: int) -> None:
    """The request header's queue and offset are those the receipt handle names."""
    handle = parse_receipt_handle(extra_info)
    if handle.queue_id != queue_id or handle.queue_offset != offset:
        raise BrokerError(
            ResponseCode.MESSAGE_ILLEGAL,
            f"extraInfo names queue {handle.queue_id} offset {handle.queue_offset}, "
            f"the header queue {queue_id} offset {offset}",
        )
