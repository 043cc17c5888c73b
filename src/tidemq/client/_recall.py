"""RECALL_MESSAGE (370) as the producer and the admin client send it: one
request builder and one answer reader, so both say the same things."""

from __future__ import annotations

from tidemq.client.errors import ClientError
from tidemq.common.recall_handle import RecallHandle, RecallHandleError
from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.protocol.headers import RecallMessageRequestHeader, encode_header


def recall_request(topic: str, handle: str, group: str | None) -> tuple[str, dict[str, str]]:
    """(broker name the handle names, request header fields); ClientError
    ILLEGAL_OPERATION for a handle that is not one, before any I/O."""
    try:
        broker_name = RecallHandle.decode(handle).broker_name
    except RecallHandleError as exc:
        raise ClientError(f"recall failed, {exc}", ResponseCode.ILLEGAL_OPERATION) from None
    header = RecallMessageRequestHeader(producer_group=group, topic=topic, recall_handle=handle)
    return broker_name, encode_header(header)


def recall_answer(response: RemotingCommand, topic: str) -> str:
    """The recalled message's id, or the ClientError the broker's answer stands for."""
    if response.code != ResponseCode.SUCCESS:
        raise ClientError(
            f"recall of a message of {topic} refused: {response.remark or response.code}",
            response.code,
        )
    return str(response.ext_fields.get("msgId", ""))
