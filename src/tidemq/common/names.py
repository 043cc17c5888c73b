"""Which topic and group names the broker accepts: RocketMQ's TopicValidator.

A name reaches the file system (a topic is a consumequeue directory), JSON
keys (`topic@group`) and logs, so every request's names are checked here
before anything acts on them. The rules are Java's
(common/.../topic/TopicValidator.java): only `%|a-zA-Z0-9_-`, not blank, a
topic at most 127 characters (a %RETRY% or %DLQ% topic 255, since it holds
a group name), a group at most 120 (it becomes part of those topics).

The checks are pure and answer the readable reason, or None; the remarks
follow Java's wording but show a long name shortened, so a 100k-character
name cannot blow up a response or a log line.
"""

from __future__ import annotations

import re

TOPIC_MAX_LENGTH = 127
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255
GROUP_MAX_LENGTH = 120
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
"""MixAll.RETRY_GROUP_TOPIC_PREFIX: a group's retry topic is this + the group."""
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
"""MixAll.DLQ_GROUP_TOPIC_PREFIX: a group's dead-letter topic is this + the group."""
ALLOWED = "^[%|a-zA-Z0-9_-]+$"

_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_PREVIEW = 60


def retry_topic_of(group: str) -> str:
    """The group's retry topic (MixAll.getRetryTopic)."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic_of(group: str) -> str:
    """The group's dead-letter topic (MixAll.getDLQTopic)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """A group's retry topic, or a POP retry topic (`%RETRY%<group>_<topic>`)."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def preview(name: str) -> str:
    """`name` quoted for a remark, cut to a readable length."""
    return repr(name) if len(name) <= _PREVIEW else repr(name[:_PREVIEW]) + "..."


def topic_max_length(topic: str) -> int:
    if is_retry_topic(topic) or is_dlq_topic(topic):
        return RETRY_OR_DLQ_TOPIC_MAX_LENGTH
    return TOPIC_MAX_LENGTH


def validate_topic_name(topic: str) -> str | None:
    """Why `topic` is not a valid topic name, or None (TopicValidator.validateTopic)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if _VALID_NAME.fullmatch(topic) is None:
        return (
            f"The specified topic {preview(topic)} contains illegal characters, "
            f"allowing only {ALLOWED}"
        )
    limit = topic_max_length(topic)
    if len(topic) > limit:
        return (
            f"The specified topic is {len(topic)} characters long, "
            f"longer than the maximum of {limit}."
        )
    return None


def validate_group_name(group: str) -> str | None:
    """Why `group` is not a valid group name, or None (TopicValidator.validateGroup)."""
    if not group or not group.strip():
        return "The specified group is blank."
    if _VALID_NAME.fullmatch(group) is None:
        return (
            f"The specified group {preview(group)} contains illegal characters, "
            f"allowing only {ALLOWED}"
        )
    if len(group) > GROUP_MAX_LENGTH:
        return (
            f"The specified group is {len(group)} characters long, "
            f"longer than the maximum of {GROUP_MAX_LENGTH}."
        )
    return None


def is_safe_path_component(name: str) -> bool:
    """True when `name` can be one directory name inside the store and nothing else.

    The store's own last line of defence, whatever a caller passes: no
    separator, no NUL, not `.` or `..`, not empty, and short enough for any
    file system (255 bytes).
    """
    if not name or name in (".", ".."):
        return False
    if "/" in name or "\\" in name or "\x00" in name:
        return False
    try:
        return len(name.encode()) <= 255
    except UnicodeEncodeError:
        return False
