"""The topic and group names a remoting request carries, checked before any handler runs.

Every request header names its topic and groups with a handful of extFields
keys (`topic`, `consumerGroup`, ...; the one-letter send headers use `a`,
`b`, `c`). Checking those keys in one place means no handler, present or
future, can act on a name like `../..` or a 100k-character string: such a
request is answered INVALID_PARAMETER with Java's TopicValidator remark,
as Java's send and topic-admin processors answer it.

A key that is present is checked even when it is empty: an empty topic is
the most dangerous name of all (it is the consumequeue directory itself).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from tidemq.common.names import validate_group_name, validate_topic_name

from .codes import RequestCode, ResponseCode
from .command import RemotingCommand

TOPIC_KEYS: tuple[str, ...] = ("topic", "originTopic", "defaultTopic")
GROUP_KEYS: tuple[str, ...] = ("consumerGroup", "producerGroup", "group", "groupName")

SEND_V2_CODES = frozenset(
    {
        int(RequestCode.SEND_MESSAGE_V2),
        int(RequestCode.SEND_BATCH_MESSAGE),
        int(RequestCode.TIDEMQ_SEND_HALF_BATCH),
    }
)
_SEND_V2_TOPIC_KEYS: tuple[str, ...] = ("b", "c")
_SEND_V2_GROUP_KEYS: tuple[str, ...] = ("a",)


def named_fields(code: int, ext_fields: Mapping[str, object]) -> Iterator[tuple[str, str, str]]:
    """(key, "topic" or "group", value) for every name field the request carries."""
    topic_keys, group_keys = TOPIC_KEYS, GROUP_KEYS
    if code in SEND_V2_CODES:
        topic_keys, group_keys = _SEND_V2_TOPIC_KEYS, _SEND_V2_GROUP_KEYS
    for key in topic_keys:
        value = ext_fields.get(key)
        if value is not None:
            yield key, "topic", str(value)
    for key in group_keys:
        value = ext_fields.get(key)
        if value is not None:
            yield key, "group", str(value)


def name_problem(code: int, ext_fields: Mapping[str, object]) -> str | None:
    """Why the request's names are refused, or None.

    Every request of a busy connection names the same few topics and groups,
    so names found valid are remembered (`_ACCEPTED`, bounded) and not
    checked again."""
    topic_keys, group_keys = TOPIC_KEYS, GROUP_KEYS
    if code in SEND_V2_CODES:
        topic_keys, group_keys = _SEND_V2_TOPIC_KEYS, _SEND_V2_GROUP_KEYS
    for keys, validate in ((topic_keys, validate_topic_name), (group_keys, validate_group_name)):
        for key in keys:
            value = ext_fields.get(key)
            if value is None:
                continue
            name = str(value)
            accepted = _ACCEPTED[validate]
            if name in accepted:
                continue
            problem = validate(name)
            if problem is not None:
                named = key in ("topic", "b", "group", "groupName")
                return problem if named else f"{key}: {problem}"
            if len(accepted) >= _ACCEPTED_LIMIT:
                accepted.clear()
            accepted.add(name)
    return None


_ACCEPTED_LIMIT = 4096
"""Names remembered per kind; valid names are at most 255 characters, so
this bounds the memory at about 1 MiB per kind."""
_ACCEPTED: dict[object, set[str]] = {validate_topic_name: set(), validate_group_name: set()}


def refuse_bad_names(request: RemotingCommand) -> RemotingCommand | None:
    """INVALID_PARAMETER for a request with a bad topic or group name, else None."""
    problem = name_problem(request.code, request.ext_fields)
    if problem is None:
        return None
    return RemotingCommand.response_to(request, ResponseCode.INVALID_PARAMETER, problem)
