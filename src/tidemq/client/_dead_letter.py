"""Resending a dead letter: the copy of a `%DLQ%<group>` message that goes
back to the group once more (pure; AdminClient.resend_dead_letter sends it).

rocketmq-dashboard resends a DLQ message by asking the broker to push it to
one online consumer of the group (CONSUME_MESSAGE_DIRECTLY,
``DlqMessageServiceImpl.batchResendDlqMessage``): nothing is stored, and
nothing happens when no consumer is online. Here the copy is stored in the
group's retry topic `%RETRY%<group>`, as the broker's own send-back stores a
retry (``tidemq.broker.retry.build_send_back``): only that group gets it
again (other groups consumed the original already), whether its consumers
are online now or later, with a fresh retry budget:

* topic `%RETRY%<group>`; RETRY_TOPIC (set by the send-back that made the
  dead letter) stays the original topic, so the consumer hands the listener
  the topic it subscribed to;
* RECONSUME_TIME "0" (the header's reconsume times, so the broker does not
  route it straight back to the DLQ), MAX_RECONSUME_TIMES dropped (the
  group's limit applies);
* DELAY, WAIT and the timer properties dropped: it is due now;
* body, flag, tags, keys, UNIQ_KEY (the id people know it by),
  ORIGIN_MESSAGE_ID and the user properties kept.
"""

from __future__ import annotations

from tidemq.common import properties as props
from tidemq.common.message import Message, MessageExt
from tidemq.common.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    is_dlq_topic,
    retry_topic_of,
)

__all__ = ["dead_letter_group", "retry_copy"]

_DROPPED = frozenset(
    {
        props.DELAY,
        props.WAIT,
        props.MAX_RECONSUME_TIMES,
        props.TIMER_DELIVER_MS,
        props.TIMER_DELAY_SEC,
        props.TIMER_DELAY_MS,
        props.TIMER_OUT_MS,
        props.TIMER_ENQUEUE_MS,
        props.TIMER_DEQUEUE_MS,
        props.TIMER_ROLL_TIMES,
        props.START_DELIVER_TIME,
        props.REAL_TOPIC,
        props.REAL_QID,
    }
)


def dead_letter_group(topic: str) -> str | None:
    """The consumer group of a `%DLQ%<group>` topic, None for any other topic."""
    if not is_dlq_topic(topic):
        return None
    return topic[len(DLQ_GROUP_TOPIC_PREFIX) :] or None


def retry_copy(message: MessageExt, group: str) -> Message:
    """The message to store in `group`'s retry topic for dead letter `message`
    (see the module docstring); ValueError when `message` is not a dead
    letter of `group`."""
    if dead_letter_group(message.topic) != group:
        raise ValueError(
            f"message {message.msg_id} is in {message.topic}, not in the dead-letter "
            f"topic {DLQ_GROUP_TOPIC_PREFIX}{group}"
        )
    properties = {k: v for k, v in message.properties.items() if k not in _DROPPED}
    properties[props.RECONSUME_TIME] = "0"
    if not properties.get(props.ORIGIN_MESSAGE_ID, "").strip():
        properties[props.ORIGIN_MESSAGE_ID] = message.msg_id
    return Message(retry_topic_of(group), bytes(message.body), message.flag, properties)
