"""Retry and dead-letter routing (SPEC §4, protocol-remoting.md §5.3 and §6.7).

Pure functions; the broker does the I/O (look the record up by commit-log
offset, ensure the topics exist, store, schedule).

CONSUMER_SEND_MSG_BACK, as Java 4.9 `SendMessageProcessor.consumerSendMsgBack`:

* `RETRY_TOPIC` := the record's topic unless the property is already there
  (a retry of a retry keeps the first topic);
* `ORIGIN_MESSAGE_ID` := the record's property unless blank, else the
  record's own offset msg id, so it names the first stored copy forever;
* `WAIT` := "false" (Java sets it before building the property string);
* reconsume times := the record's + 1;
* record reconsume times >= max, or delay level < 0: `%DLQ%<group>` queue 0,
  no delay; otherwise `%RETRY%<group>` queue 0 (Java draws a random queue
  among the group's retry queues, which number 1), with delay level
  `3 + record reconsume times` when the request says 0 ("broker decides":
  10 s, 30 s, 1 m, 2 m ...), else the requested level; DELAY := that level.
* body, flag, sysFlag (COMPRESSED bit included), born timestamp and born
  host are the record's; the store stamps the new store time and host.

SEND_MESSAGE to `%RETRY%<group>` (ali-ons' fallback when the send-back
failed) goes to `%DLQ%<group>` queue 0 when the header's reconsume times
reach the header's max reconsume times (or the group's when absent).
"""

from __future__ import annotations

from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.common.message_id import host_bytes, offset_message_id
from tidemq.common.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic_of,
    is_dlq_topic,
    is_retry_topic,
    retry_topic_of,
)
from tidemq.store.api import MessageToStore

RETRY_BASE_LEVEL = 3
"""delay level 0 in a send-back means level 3 + reconsume times (10 s first)."""
DEFAULT_MAX_RECONSUME_TIMES = 16
"""Java's SubscriptionGroupConfig.retryMaxTimes default."""
RETRY_QUEUE_ID = 0
"""Retry and DLQ topics have one queue (retryQueueNums = DLQ_NUMS_PER_GROUP = 1)."""
DLQ_QUEUE_ID = 0


def group_of(topic: str) -> str | None:
    """The consumer group of a retry or DLQ topic, None for other topics."""
    if is_retry_topic(topic):
        return topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    if is_dlq_topic(topic):
        return topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
    return None


def split_address(address: str) -> tuple[bytes, int]:
    """("a.b.c.d:port" or "[v6]:port") -> (packed IP, port), the reverse of
    MessageExt.born_host / store_host. ValueError if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not an ip:port address: {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host_bytes(host), int(port)


def send_back_delay_level(record_reconsume_times: int, requested_level: int) -> int:
    """The delay level of a retry copy: the requested one, or 3 + reconsume times for 0."""
    if requested_level == 0:
        return RETRY_BASE_LEVEL + record_reconsume_times
    return requested_level


def goes_to_dlq(record_reconsume_times: int, delay_level: int, max_reconsume_times: int) -> bool:
    return record_reconsume_times >= max_reconsume_times or delay_level < 0


def _record_msg_id(record: MessageExt) -> str:
    if record.msg_id.strip():
        return record.msg_id
    # A MessageExt not made by decode_record: rebuild the offset id.
    store_ip, store_port = split_address(record.store_host)
    return offset_message_id(store_ip, store_port, record.commit_log_offset)


def build_send_back(
    record: MessageExt,
    group: str,
    delay_level: int,
    max_reconsume_times: int,
    born_host: bytes | None = None,
    born_port: int | None = None,
) -> tuple[MessageToStore, int]:
    """CONSUMER_SEND_MSG_BACK: the copy to store and its delay level (0: store as is).

    `record` is the stored record found by the request's commit-log offset,
    decoded *without* decompression (its body must be the stored bytes, the
    COMPRESSED sysflag bit still set). A level > 0 means the broker parks
    the copy with `DelayScheduler.schedule(copy, level)`; level 0 means the
    copy goes straight into the DLQ.

    `born_host`/`born_port` default to the record's born address (Java keeps
    it); pass them only to override it.
    """
    properties = dict(record.properties)
    if props.RETRY_TOPIC not in properties:
        properties[props.RETRY_TOPIC] = record.topic
    properties[props.WAIT] = "false"
    if goes_to_dlq(record.reconsume_times, delay_level, max_reconsume_times):
        topic, queue_id, level = dlq_topic_of(group), DLQ_QUEUE_ID, 0
        # Java leaves any DELAY as it was; a delivered record has none (or ali-ons'
        # "0"), and dropping it keeps a delay-aware put path from parking the copy.
        properties.pop(props.DELAY, None)
    else:
        topic, queue_id = retry_topic_of(group), RETRY_QUEUE_ID
        level = send_back_delay_level(record.reconsume_times, delay_level)
        properties[props.DELAY] = str(level)
    origin = properties.get(props.ORIGIN_MESSAGE_ID, "")
    if not origin.strip():
        properties[props.ORIGIN_MESSAGE_ID] = _record_msg_id(record)
    if born_host is None or born_port is None:
        record_host, record_port = split_address(record.born_host)
        born_host = record_host if born_host is None else born_host
        born_port = record_port if born_port is None else born_port
    copy = MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=record.body,
        properties=props.encode_properties(properties),
        flag=record.flag,
        sys_flag=record.sys_flag,
        born_timestamp=record.born_timestamp,
        born_host=born_host,
        born_port=born_port,
        reconsume_times=record.reconsume_times + 1,
    )
    return copy, level


def retry_route_for_send(
    topic: str, reconsume_times: int, max_reconsume_times: int | None, group_max: int
) -> tuple[str, bool]:
    """SEND_MESSAGE(_V2): the topic to store in and whether it is the DLQ.

    Only `%RETRY%<group>` topics are rerouted: to `%DLQ%<group>` (queue
    `DLQ_QUEUE_ID`, the caller sets it) when `reconsume_times` (header `j`)
    >= `max_reconsume_times` (header `l`), or >= `group_max` (the group's
    retryMaxTimes) when the header has none.
    """
    if not is_retry_topic(topic):
        return topic, False
    limit = group_max if max_reconsume_times is None else max_reconsume_times
    if reconsume_times >= limit:
        return dlq_topic_of(topic[len(RETRY_GROUP_TOPIC_PREFIX) :]), True
    return topic, False
