"""Remoting handlers of the POP codes, mixed into BrokerHandlers.

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
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tidemq.broker.pop.api import PopHooks, PopRequest, PopResult
from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.broker.requests import BrokerError
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import decode_header, encode_header
from tidemq.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

if TYPE_CHECKING:
    from tidemq.broker.service import BrokerService
    from tidemq.transport import Connection

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


class PopHandlers:
    """POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME."""

    service: BrokerService

    def _pop_service(self) -> PopHooks:
        pop = self.service.pop
        if pop is None:
            raise BrokerError(ResponseCode.NO_PERMISSION, "pop consumption is disabled")
        return pop

    async def pop_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(PopMessageRequestHeader, request.ext_fields)
        result = await self._pop_service().pop(
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

    async def ack_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(AckMessageRequestHeader, request.ext_fields)
        self._same_message(header.extra_info, header.queue_id, header.offset)
        await self._pop_service().ack(header.consumer_group, header.topic, header.extra_info)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def batch_ack_message(
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
            results = await self._pop_service().batch_ack(group, topic, handles)
            refused += results.count(False)
        if refused:
            return RemotingCommand.response_to(
                request, ResponseCode.MESSAGE_ILLEGAL, f"{refused} receipt handles were refused"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def change_invisible_time(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ChangeInvisibleTimeRequestHeader, request.ext_fields)
        self._same_message(header.extra_info, header.queue_id, header.offset)
        new_handle = await self._pop_service().change_invisible(
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

    @staticmethod
    def _same_message(extra_info: str, queue_id: int, offset: int) -> None:
        handle = parse_receipt_handle(extra_info)
        if handle.queue_id != queue_id or handle.queue_offset != offset:
            raise BrokerError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"extraInfo names queue {handle.queue_id} offset {handle.queue_offset}, "
                f"the header queue {queue_id} offset {offset}",
            )
