"""How the API shows things: topic kinds, permissions, messages and their
bodies (text, pretty JSON, or hex), as plain JSON for the page and for curl."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from tidemq.broker.topics import is_system_topic
from tidemq.client.model import SendResult, perm_text
from tidemq.common.message import MessageExt
from tidemq.common.names import is_dlq_topic, is_retry_topic

__all__ = [
    "BODY_PREVIEW",
    "body_view",
    "message_summary",
    "message_view",
    "send_result_view",
    "topic_kind",
]

BODY_PREVIEW = 120
"""Characters of a body shown in a list."""
HEX_LIMIT = 64 * 1024
"""Bytes of a binary body shown as hex (the rest is counted, not shown)."""


def topic_kind(topic: str, reserved: Collection[str] = ()) -> str:
    """NORMAL, RETRY (%RETRY%group), DLQ (%DLQ%group) or SYSTEM (the broker's
    own, and the topics named after a cluster or broker: `reserved`)."""
    if is_retry_topic(topic):
        return "RETRY"
    if is_dlq_topic(topic):
        return "DLQ"
    if is_system_topic(topic) or topic in reserved:
        return "SYSTEM"
    return "NORMAL"


def perm_view(perm: int) -> dict[str, Any]:
    return {"bits": perm, "text": perm_text(perm)}


def body_view(body: bytes) -> dict[str, Any]:
    """The body as people read it: `encoding` json (with `pretty`), text, or
    binary (with `hex`, cut at HEX_LIMIT bytes); `text` whenever it is UTF-8."""
    view: dict[str, Any] = {"size": len(body)}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        shown = body[:HEX_LIMIT]
        view.update(encoding="binary", text=None, hex=shown.hex(" "), hex_cut=len(body) > HEX_LIMIT)
        return view
    view.update(encoding="text", text=text)
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return view
        view.update(encoding="json", pretty=json.dumps(parsed, indent=2, ensure_ascii=False))
    return view


def _preview(body: bytes) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, binary>"
    return text if len(text) <= BODY_PREVIEW else text[: BODY_PREVIEW - 1] + "…"


def message_summary(message: MessageExt) -> dict[str, Any]:
    """One message in a list: ids, where and when, tags, keys, a body preview."""
    return {
        "msg_id": message.unique_key or message.msg_id,
        "offset_msg_id": message.msg_id,
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "tags": message.tags,
        "keys": message.keys,
        "store_timestamp": message.store_timestamp,
        "born_timestamp": message.born_timestamp,
        "reconsume_times": message.reconsume_times,
        "body_size": len(message.body),
        "preview": _preview(message.body),
    }


def message_view(message: MessageExt) -> dict[str, Any]:
    """One message whole: the summary, every property, hosts, the body."""
    return {
        **message_summary(message),
        "born_host": message.born_host,
        "store_host": message.store_host,
        "commit_log_offset": message.commit_log_offset,
        "sys_flag": message.sys_flag,
        "flag": message.flag,
        "properties": dict(sorted(message.properties.items())),
        "body": body_view(message.body),
    }


def send_result_view(result: SendResult) -> dict[str, Any]:
    """Where a message the page sent (or resent from a dead-letter queue) went."""
    return {
        "status": str(result.status),
        "msg_id": result.msg_id,
        "offset_msg_id": result.offset_msg_id,
        "topic": result.topic,
        "broker": result.broker_name,
        "queue": result.queue_id,
        "queue_offset": result.queue_offset,
    }
