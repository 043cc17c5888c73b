"""What a remoting request touches: the (resource, permission) pairs ACL 1.0 checks.

Before a request runs, the broker asks the policy whether the caller holds
the needed permission on every topic and group the request names. Which
names, and which permission, is fixed by RocketMQ; a client that works
against a RocketMQ broker with a given policy must be admitted and refused
here in the same cases, so this is a copy of Java's table.

A group is represented by its retry topic, ``%RETRY%<group>``, as in Java
(groupPerms are stored that way, see ``permissions.parse_resource_permission``).

Source: apache/rocketmq at f75dc5a4d2^ (the last version with ACL 1.0),
``acl/.../plain/PlainAccessResource.java`` ``parse(RemotingCommand, String)``,
lines 122-176; required header fields from
``remoting/.../protocol/header/{UnregisterClient,GetConsumerListByGroup,
UpdateConsumerOffset}RequestHeader.java`` (``@CFNotNull``; Java's decode
fails without them and parse turns that into an AclException).

That version differs from rocketmq-all-4.9.8
(``acl/.../plain/PlainAccessValidator.java`` ``parse``, lines 74-132) in two
ways, both fixes: 4.9.8 did not check SEND_BATCH_MESSAGE or RECALL_MESSAGE
at all, and a send to a ``%RETRY%`` topic needed SUB on the retry topic of
the *sending* group (ext field ``group``, which the V1 header does not even
carry; ``a`` in V2), where the later version needs SUB on the retry topic
itself, i.e. on the group whose retry topic it is.

Codes not in the table need no topic or group permission (END_TRANSACTION,
for one, is not checked by Java); admin-only codes are
``permissions.needs_admin``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tidemq.common.names import RETRY_GROUP_TOPIC_PREFIX, retry_topic_of
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.heartbeat import HeartbeatData

from .permissions import Permission

_SEND_V2 = frozenset({int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)})


def is_retry_topic(topic: str | None) -> bool:
    """PlainAccessResource.isRetryTopic."""
    return topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(resource: str) -> str:
    """PlainAccessResource.getGroupFromRetryTopic: the group a resource stands for."""
    return resource[len(RETRY_GROUP_TOPIC_PREFIX) :]


def _required(ext_fields: Mapping[str, str], code: int, *names: str) -> None:
    for name in names:
        if ext_fields.get(name) is None:
            raise ValueError(f"{RequestCode(code).name}: the custom field <{name}> is null")


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _integer(ext_fields: Mapping[str, str], code: int, name: str, bits: int) -> None:
    """Integer.parseInt / Long.parseLong, as Java's header decode applies them."""
    value = ext_fields[name]
    limit = 1 << (bits - 1)
    if not (_JAVA_INT.fullmatch(value) and -limit <= int(value) < limit):
        raise ValueError(f"{RequestCode(code).name}: <{name}> is not a number: {value!r}")


def needed_permissions(
    code: int,
    ext_fields: Mapping[str, str] | None,
    heartbeat: HeartbeatData | None = None,
) -> list[tuple[str, Permission]]:
    """The (resource, permission) pairs PlainAccessResource.parse derives.

    ``ext_fields`` are as sent; ``heartbeat`` is the decoded body of a
    HEART_BEAT (``tidemq.protocol.heartbeat.parse_heartbeat``). A name that
    is absent adds nothing; a resource named twice keeps the last permission
    (Java's HashMap). Raises ValueError where Java's parse raises (a header
    missing a required field, a HEART_BEAT without its body)."""
    if ext_fields is None:
        return []  # Java returns before the switch: only the address rules apply
    found: dict[str, Permission] = {}

    def add(resource: str | None, perm: Permission) -> None:
        if resource is not None:
            found[resource] = perm

    def group(name: str | None) -> str | None:
        return None if name is None else retry_topic_of(name)

    get = ext_fields.get
    if code == RequestCode.SEND_MESSAGE or code in _SEND_V2:
        topic = get("topic") if code == RequestCode.SEND_MESSAGE else get("b")
        add(topic, Permission.SUB if is_retry_topic(topic) else Permission.PUB)
    elif code == RequestCode.RECALL_MESSAGE:
        add(get("topic"), Permission.PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(group(get("group")), Permission.SUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(get("topic"), Permission.SUB)
        add(group(get("consumerGroup")), Permission.SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(get("topic"), Permission.SUB)
    elif code == RequestCode.HEART_BEAT:
        if heartbeat is None:
            raise ValueError("HEART_BEAT: the body is missing or not a heartbeat")
        for consumer in heartbeat.consumers:
            add(group(consumer.group_name), Permission.SUB)
            for subscription in consumer.subscriptions:
                add(subscription.topic, Permission.SUB)
    elif code == RequestCode.UNREGISTER_CLIENT:
        _required(ext_fields, code, "clientID")
        add(group(get("consumerGroup")), Permission.SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        _required(ext_fields, code, "consumerGroup")
        add(group(get("consumerGroup")), Permission.SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        _required(ext_fields, code, "consumerGroup", "topic", "queueId", "commitOffset")
        _integer(ext_fields, code, "queueId", 32)
        _integer(ext_fields, code, "commitOffset", 64)
        add(group(get("consumerGroup")), Permission.SUB)
        add(get("topic"), Permission.SUB)
    return list(found.items())
