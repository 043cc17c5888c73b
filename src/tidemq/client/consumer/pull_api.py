"""One PULL_MESSAGE (11) round trip: request header, status mapping, decoding
and the client-side tag check (Java's PullAPIWrapper).

Every consumer kind (push, lite pull, the CLI's tail) pulls through
:func:`pull_message`; the loops around it (flow control, offsets, retries)
belong to the callers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tidemq.client._wire import decode_messages, remark
from tidemq.client.consumer.pull_nodes import MASTER_ID, PullNodeTable
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common import properties, sysflag
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    decode_header,
    encode_header,
)

__all__ = [
    "DEFAULT_PULL_BATCH_SIZE",
    "DEFAULT_SUSPEND_MS",
    "PullResult",
    "PullStatus",
    "pull_message",
    "pull_raw",
    "pull_request_fields",
    "pull_result",
    "pull_status",
    "pull_timeout",
]

DEFAULT_PULL_BATCH_SIZE = 32
DEFAULT_SUSPEND_MS = 15_000
"""How long the broker may hold a pull open waiting for messages (long polling)."""
SUSPEND_TIMEOUT_MARGIN_S = 5.0
"""Added to the suspend time for the request timeout of a long-polling pull."""


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_BY_CODE: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    """Already filtered by the subscription's exact tag check, in offset order."""
    suggest_which_broker_id: int = 0
    unfiltered_count: int = 0
    """Records decoded before the tag check (0 unless FOUND)."""


async def pull_message(
    instance: ClientInstance,
    *,
    group: str,
    mq: MessageQueue,
    subscription: SubscriptionSpec,
    offset: int,
    max_nums: int = DEFAULT_PULL_BATCH_SIZE,
    commit_offset: int | None = None,
    suspend_ms: int = DEFAULT_SUSPEND_MS,
    timeout_s: float | None = None,
    send_subscription: bool = True,
    nodes: PullNodeTable | None = None,
) -> PullResult:
    """Pull up to `max_nums` messages of `mq` from `offset` from the broker of
    its group that `nodes` says (the master without it, or a slave when the
    master is not in the route); the answer's suggestion goes into `nodes`.

    `commit_offset` > 0 is carried with the COMMIT_OFFSET flag (the broker
    stores it as the group's offset); `suspend_ms` 0 asks for no long
    polling. PULL_NOT_FOUND -> NO_NEW_MSG, PULL_RETRY_IMMEDIATELY ->
    NO_MATCHED_MSG, PULL_OFFSET_MOVED -> OFFSET_ILLEGAL; any other answer is a
    ClientError with the broker's remark and code, no answer a ClientError
    with an RPC_* code.
    """
    response, address = await _pull(
        instance,
        group=group,
        mq=mq,
        subscription=subscription,
        offset=offset,
        max_nums=max_nums,
        commit_offset=commit_offset,
        suspend_ms=suspend_ms,
        timeout_s=timeout_s,
        send_subscription=send_subscription,
        nodes=nodes,
    )
    result = pull_result(response, mq=mq, offset=offset, subscription=subscription, address=address)
    if nodes is not None:
        nodes.update(mq, result.suggest_which_broker_id)
    return result


async def pull_raw(
    instance: ClientInstance,
    *,
    group: str,
    mq: MessageQueue,
    subscription: SubscriptionSpec,
    offset: int,
    max_nums: int = DEFAULT_PULL_BATCH_SIZE,
    suspend_ms: int = DEFAULT_SUSPEND_MS,
    nodes: PullNodeTable | None = None,
) -> tuple[PullResult, bytes]:
    """`pull_message` without decoding: the result (no messages) and the raw
    records, for callers that decode only the fields they need (the Spark
    source reads them into columns). No client-side tag check either."""
    response, address = await _pull(
        instance,
        group=group,
        mq=mq,
        subscription=subscription,
        offset=offset,
        max_nums=max_nums,
        commit_offset=None,
        suspend_ms=suspend_ms,
        timeout_s=None,
        send_subscription=True,
        nodes=nodes,
    )
    result = pull_status(response, mq=mq, offset=offset, address=address)
    if nodes is not None:
        nodes.update(mq, result.suggest_which_broker_id)
    found = result.status is PullStatus.FOUND
    return result, (response.body or b"") if found else b""


async def _pull(
    instance: ClientInstance,
    *,
    group: str,
    mq: MessageQueue,
    subscription: SubscriptionSpec,
    offset: int,
    max_nums: int,
    commit_offset: int | None,
    suspend_ms: int,
    timeout_s: float | None,
    send_subscription: bool,
    nodes: PullNodeTable | None,
) -> tuple[RemotingCommand, str]:
    broker_id = nodes.which(mq) if nodes is not None else MASTER_ID
    found = await instance.require_subscribe_broker(mq.broker_name, mq.topic, broker_id)
    if found.slave:
        commit_offset = None  # a slave keeps no offset a pull carries (PullAPIWrapper)
    fields = pull_request_fields(
        group=group,
        mq=mq,
        subscription=subscription,
        offset=offset,
        max_nums=max_nums,
        commit_offset=commit_offset,
        suspend_ms=suspend_ms,
        send_subscription=send_subscription,
    )
    if timeout_s is None:
        timeout_s = pull_timeout(suspend_ms, instance.config.request_timeout_s)
    response = await instance.invoke(
        found.address, RequestCode.PULL_MESSAGE, fields, timeout=timeout_s
    )
    return response, found.address


def pull_request_fields(
    *,
    group: str,
    mq: MessageQueue,
    subscription: SubscriptionSpec,
    offset: int,
    max_nums: int = DEFAULT_PULL_BATCH_SIZE,
    commit_offset: int | None = None,
    suspend_ms: int = DEFAULT_SUSPEND_MS,
    send_subscription: bool = True,
) -> dict[str, str]:
    """The PULL_MESSAGE header fields (sysFlag from the arguments, as Java builds it)."""
    if offset < 0:
        raise ValueError(f"pull offset must be >= 0, not {offset}")
    if max_nums <= 0:
        raise ValueError(f"max_nums must be positive, not {max_nums}")
    if suspend_ms < 0:
        raise ValueError(f"suspend_ms must be >= 0, not {suspend_ms}")
    carried = commit_offset if commit_offset is not None and commit_offset > 0 else 0
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sysflag.build_pull_sys_flag(
            commit_offset=carried > 0,
            suspend=suspend_ms > 0,
            subscription=send_subscription,
        ),
        commit_offset=carried,
        suspend_timeout_millis=suspend_ms,
        subscription=subscription.expression if send_subscription else None,
        sub_version=subscription.sub_version,
        expression_type=subscription.expression_type if send_subscription else None,
    )
    return encode_header(header)


def pull_timeout(suspend_ms: int, request_timeout_s: float) -> float:
    """How long to wait for a pull: the suspend time plus a margin, if long polling."""
    if suspend_ms > 0:
        return suspend_ms / 1000 + SUSPEND_TIMEOUT_MARGIN_S
    return request_timeout_s


def pull_result(
    response: RemotingCommand,
    *,
    mq: MessageQueue,
    offset: int,
    subscription: SubscriptionSpec,
    address: str,
) -> PullResult:
    """Map a PULL_MESSAGE answer; records below `offset` or not matching are left out."""
    result = pull_status(response, mq=mq, offset=offset, address=address)
    if result.status is PullStatus.FOUND and response.body:
        decoded = decode_messages(response.body, address)
        result.unfiltered_count = len(decoded)
        result.messages = _kept(decoded, offset, subscription)
        min_text, max_text = str(result.min_offset), str(result.max_offset)
        for message in result.messages:
            message_properties = message.properties
            message_properties[properties.MIN_OFFSET] = min_text
            message_properties[properties.MAX_OFFSET] = max_text
    return result


def _kept(
    decoded: list[MessageExt], offset: int, subscription: SubscriptionSpec
) -> list[MessageExt]:
    """The records at or after `offset` that match the subscription's tags.

    The usual pull keeps everything (no record below the offset, and "*" or
    SQL92): one cheap pass over the offsets tells, instead of a tag test per
    message.
    """
    if (
        subscription.tags is None
        and min([m.queue_offset for m in decoded], default=offset) >= offset
    ):
        return decoded
    return [m for m in decoded if m.queue_offset >= offset and subscription.matches(m)]


def pull_status(
    response: RemotingCommand, *, mq: MessageQueue, offset: int, address: str
) -> PullResult:
    """The status and offsets of a PULL_MESSAGE answer (no messages decoded)."""
    status = _STATUS_BY_CODE.get(response.code)
    if status is None:
        raise ClientError(
            f"pulling {mq.topic}/{mq.broker_name}/{mq.queue_id} at {offset}: {remark(response)}",
            response.code,
        )
    try:
        header = decode_header(PullMessageResponseHeader, response.ext_fields)
    except ProtocolError as exc:
        raise ClientError(
            f"malformed pull response from {address}: {exc}", ResponseCode.SYSTEM_ERROR
        ) from None
    result = PullResult(
        status=status,
        next_begin_offset=header.next_begin_offset,
        min_offset=header.min_offset,
        max_offset=header.max_offset,
        suggest_which_broker_id=header.suggest_which_broker_id,
    )
    return result
