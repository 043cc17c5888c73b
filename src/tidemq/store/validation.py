"""What the store refuses to write, with the reason a person can read."""

from __future__ import annotations

from collections.abc import Sequence

from tidemq.common.names import is_safe_path_component, preview
from tidemq.store.api import MessageToStore, PutStatus
from tidemq.store.config import StoreConfig

MAX_PROPERTIES_BYTES = 32767
MAX_TOPIC_BYTES = 32767


def _utf8_length(text: str) -> int:
    """Bytes of `text` in UTF-8 without encoding it in the common ASCII case
    (raises UnicodeEncodeError for a lone surrogate, as encoding would)."""
    return len(text) if text.isascii() else len(text.encode())


def validate_message(message: MessageToStore, config: StoreConfig) -> tuple[PutStatus, str] | None:
    if not message.topic:
        return PutStatus.MESSAGE_ILLEGAL, "the topic is empty"
    if _utf8_length(message.topic) > MAX_TOPIC_BYTES:
        return PutStatus.MESSAGE_ILLEGAL, "the topic name is too long"
    if not is_safe_path_component(message.topic):
        return PutStatus.MESSAGE_ILLEGAL, f"the topic {preview(message.topic)} is not a valid name"
    if message.queue_id < 0:
        return PutStatus.MESSAGE_ILLEGAL, f"queue id {message.queue_id} is negative"
    size = len(message.body)
    if size > config.max_message_size:
        return (
            PutStatus.MESSAGE_ILLEGAL,
            f"the message body is {size} bytes, more than the maximum of "
            f"{config.max_message_size} bytes",
        )
    props_size = _utf8_length(message.properties)
    if props_size > MAX_PROPERTIES_BYTES:
        return (
            PutStatus.PROPERTIES_SIZE_EXCEEDED,
            f"the message properties are {props_size} bytes, more than {MAX_PROPERTIES_BYTES}",
        )
    if len(message.born_host) not in (4, 16):
        return PutStatus.MESSAGE_ILLEGAL, "the born host is not an IPv4 or IPv6 address"
    return None


def validate_batch(
    messages: Sequence[MessageToStore], config: StoreConfig
) -> tuple[PutStatus, str] | None:
    """A batch is stored whole or not at all."""
    if not messages:
        return PutStatus.MESSAGE_ILLEGAL, "the batch is empty"
    for position, message in enumerate(messages):
        problem = validate_message(message, config)
        if problem is not None:
            status, remark = problem
            prefix = f"message {position} of the batch: " if len(messages) > 1 else ""
            return status, prefix + remark
    return None
