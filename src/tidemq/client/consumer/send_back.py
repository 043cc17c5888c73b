"""Failed messages go back to the broker (CONSUMER_SEND_MSG_BACK), and
re-delivered ones get their original topic back before a listener sees them.

The broker copies a sent-back record into ``%RETRY%<group>`` (or the DLQ once
the reconsume times reach the maximum) and records the original topic in the
RETRY_TOPIC property; :func:`restore_retry_topics` undoes the rename on the
client, as Java's ``resetRetryAndNamespace`` does, so a listener subscribed to
``Orders`` sees ``Orders`` on its retries too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.names import retry_topic_of
from tidemq.protocol import RequestCode, ResponseCode
from tidemq.protocol.headers import ConsumerSendMsgBackRequestHeader, encode_header

__all__ = ["restore_retry_topics", "send_message_back"]

log = logging.getLogger(__name__)


def restore_retry_topics(messages: Iterable[MessageExt], group: str) -> None:
    """Give retry copies of ``group`` their original topic (property RETRY_TOPIC)."""
    retry = retry_topic_of(group)
    for msg in messages:
        if msg.topic != retry:
            continue
        original = msg.properties.get(props.RETRY_TOPIC)
        if original:
            msg.topic = original


def origin_message_id(message: MessageExt) -> str:
    """The id of the first stored copy: ORIGIN_MESSAGE_ID on a retry, else msg_id."""
    return message.properties.get(props.ORIGIN_MESSAGE_ID) or message.msg_id


async def send_message_back(
    instance: ClientInstance,
    *,
    group: str,
    message: MessageExt,
    delay_level: int,
    broker_name: str,
    max_reconsume_times: int,
    timeout_s: float = 5.0,
) -> None:
    """CONSUMER_SEND_MSG_BACK (36) for ``message`` to the master of
    ``broker_name`` (its store host when the master is unknown).

    ``delay_level`` 0 lets the broker choose (3 + reconsume times), -1 sends
    straight to the DLQ. Raises ClientError when the broker cannot be reached
    or refuses.
    """
    address = instance.master_address(broker_name) or message.store_host
    if not address:
        raise ClientError(
            f"cannot send message {message.msg_id} back: broker {broker_name} is unknown",
            ResponseCode.BROKER_NOT_EXIST,
        )
    header = ConsumerSendMsgBackRequestHeader(
        offset=message.commit_log_offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=origin_message_id(message),
        origin_topic=message.topic,
        max_reconsume_times=max_reconsume_times,
    )
    response = await instance.invoke(
        address, RequestCode.CONSUMER_SEND_MSG_BACK, encode_header(header), timeout=timeout_s
    )
    if response.code != ResponseCode.SUCCESS:
        raise ClientError(
            f"broker {broker_name} refused to take message {message.msg_id} back: "
            f"{response.remark or response.code}",
            response.code,
        )
