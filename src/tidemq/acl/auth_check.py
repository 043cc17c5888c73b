"""Authorization of a 5.x user: the request's needs as RocketMQ 5 actions, judged by its ACL.

The resources a request names are derived once, the ACL 1.0 way
(``resources.needed_permissions`` for remoting, ``tidemq.grpc.access`` for
gRPC): (topic, PUB/SUB) and (``%RETRY%group``, SUB). Here they become what
RocketMQ 5's auth module asks for (apache/rocketmq 5.3.0 on, read at HEAD:
``remoting/.../protocol/header/*RequestHeader.java`` ``@RocketMQAction``
annotations, and ``DefaultAuthorizationContextBuilder.build``): a send is Pub
on ``Topic:T``; a pull or heartbeat is Sub on ``Topic:T`` and Sub on
``Group:G``; reading a consumer offset takes Sub or Get, writing one Sub or
Update, on both (``user_wants``). Admin-only requests
need an action (``ADMIN_ACTIONS``: creation Create, deletion Delete, a user
or ACL read or list Get, any other change Update) on what they name: a topic's
creation ``Topic:T`` (``CreateTopicRequestHeader``: action CREATE,
``@RocketMQResource(TOPIC)`` on ``topic``), and so a topic's deletion
``Topic:T`` and a group's ``Group:G`` (``groupName``); anything else
``Cluster`` (tidemq does not read a group creation's body for its name). A
Super user may do anything (``auth/.../authorization/chain/
UserAuthorizationHandler.java`` skips the ACL for it).

Refusal texts are AclAuthorizationHandler's: "User:U has no permission to
access Topic:T from IP, no matched policies." / "..., the decision is deny."
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tidemq.protocol.codes import RequestCode

from .auth_model import Action, AuthState, Decision, Resource, User, deciding_entry
from .denial import Denial, Reason
from .permissions import Permission
from .resources import group_of_retry_topic, is_retry_topic

__all__ = [
    "ADMIN_ACTIONS",
    "Wanted",
    "admin_action",
    "admin_target",
    "authorize_user",
    "lock_wants",
    "user_wants",
]

ADMIN_ACTIONS: dict[int, Action] = {
    int(RequestCode.UPDATE_AND_CREATE_TOPIC): Action.CREATE,
    int(RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC): Action.CREATE,
    int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): Action.CREATE,
    int(RequestCode.DELETE_TOPIC_IN_BROKER): Action.DELETE,
    int(RequestCode.DELETE_SUBSCRIPTIONGROUP): Action.DELETE,
    int(RequestCode.AUTH_GET_USER): Action.GET,
    int(RequestCode.AUTH_GET_ACL): Action.GET,
    int(RequestCode.AUTH_LIST_USER): Action.GET,
    int(RequestCode.AUTH_LIST_ACL): Action.GET,
}
"""The action on ``Cluster`` an admin-only request needs; any other is Update. The
user and ACL codes are their headers' (rocketmq-all-5.3.3 ``remoting/.../header/
{Create,Update,Delete,Get,List}{User,Acl}RequestHeader.java`` ``@RocketMQAction``:
Update for the changes, Get for the reads, lists included)."""


def admin_action(code: int) -> Action:
    return ADMIN_ACTIONS.get(code, Action.UPDATE)


_NAMED_BY: dict[int, tuple[str, str]] = {
    int(RequestCode.UPDATE_AND_CREATE_TOPIC): ("Topic", "topic"),
    int(RequestCode.DELETE_TOPIC_IN_BROKER): ("Topic", "topic"),
    int(RequestCode.DELETE_SUBSCRIPTIONGROUP): ("Group", "groupName"),
}


def admin_target(code: int, ext_fields: Mapping[str, str] | None) -> Resource:
    """What an admin-only request acts on: its topic or group when it names one, else Cluster."""
    kind_and_field = _NAMED_BY.get(code)
    name = (ext_fields or {}).get(kind_and_field[1]) if kind_and_field else None
    if kind_and_field is None or not name:
        return Resource.cluster()
    if kind_and_field[0] == "Topic":
        return Resource.topic(name)
    return Resource.group(name)


def _wanted(resource: str, perm: Permission) -> tuple[Resource, Action]:
    action = Action.PUB if perm == Permission.PUB else Action.SUB
    if perm == Permission.ANY:
        action = Action.ANY
    if is_retry_topic(resource):
        return Resource.group(group_of_retry_topic(resource)), action
    return Resource.topic(resource), action


Wanted = tuple[Resource, tuple[Action, ...]]
"""A resource and the actions of which any one grants the request."""

_TOPIC_AND_GROUP_ACTIONS: dict[int, tuple[Action, ...]] = {
    int(RequestCode.QUERY_CONSUMER_OFFSET): (Action.SUB, Action.GET),
    int(RequestCode.UPDATE_CONSUMER_OFFSET): (Action.SUB, Action.UPDATE),
}


_GROUP_AND_TOPIC = (("Group", "consumerGroup"), ("Topic", "topic"))
_TOPIC = (("Topic", "topic"),)

_ANNOTATED: dict[int, tuple[Action, tuple[tuple[str, str], ...]]] = {
    int(RequestCode.POP_MESSAGE): (Action.SUB, _GROUP_AND_TOPIC),
    int(RequestCode.ACK_MESSAGE): (Action.SUB, _GROUP_AND_TOPIC),
    int(RequestCode.CHANGE_MESSAGE_INVISIBLETIME): (Action.SUB, _GROUP_AND_TOPIC),
    int(RequestCode.NOTIFICATION): (Action.SUB, _GROUP_AND_TOPIC),
    int(RequestCode.POLLING_INFO): (Action.GET, _GROUP_AND_TOPIC),
    int(RequestCode.GET_MAX_OFFSET): (Action.GET, _TOPIC),
    int(RequestCode.GET_MIN_OFFSET): (Action.GET, _TOPIC),
    int(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP): (Action.GET, _TOPIC),
    int(RequestCode.GET_EARLIEST_MSG_STORETIME): (Action.GET, _TOPIC),
    int(RequestCode.VIEW_MESSAGE_BY_ID): (Action.GET, _TOPIC),
    int(RequestCode.GET_CONSUMER_RUNNING_INFO): (Action.GET, (("Group", "consumerGroup"),)),
    int(RequestCode.CONSUME_MESSAGE_DIRECTLY): (Action.SUB, _GROUP_AND_TOPIC),
    int(RequestCode.GET_CONSUME_STATS): (Action.GET, _GROUP_AND_TOPIC),
}
"""The requests RocketMQ 5 judges by their header's annotations
(``buildContextByAnnotation``: ``@RocketMQAction`` on the header class, each
``@RocketMQResource`` field a resource, a retry topic its group), for the codes
tidemq answers that the ACL 1.0 derivation leaves unchecked: the action, and
(resource kind, header field) pairs. Headers at apache/rocketmq 8fc57f1468:
Pop/Ack/ChangeInvisibleTime/Notification (Sub), PollingInfo, Get{Max,Min}Offset,
SearchOffset, GetEarliestMsgStoretime, ViewMessage, GetConsumerRunningInfo,
GetConsumeStats (Get)."""


def _annotated(code: int, fields: Mapping[str, str]) -> list[Wanted] | None:
    """What `code`'s header annotations ask, None for a code without them here."""
    found = _ANNOTATED.get(code)
    if found is None:
        return None
    action, named = found
    wants: list[Wanted] = []
    for kind, field in named:
        value = fields.get(field)
        if value is None:
            continue
        if kind == "Topic" and not is_retry_topic(value):
            wants.append((Resource.topic(value), (action,)))
        else:
            group = group_of_retry_topic(value) if is_retry_topic(value) else value
            wants.append((Resource.group(group), (action,)))
    return wants


_LOCK_CODES = frozenset({int(RequestCode.LOCK_BATCH_MQ), int(RequestCode.UNLOCK_BATCH_MQ)})


def lock_wants(body: bytes) -> list[Wanted]:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: Sub on the body's group and on each
    queue's topic that is not a retry topic (DefaultAuthorizationContextBuilder
    reads LockBatchRequestBody). ValueError for a body that is not one, which
    RocketMQ refuses too (the builder's decode fails)."""
    try:
        document = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the lock batch body is not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("consumerGroup"), str):
        raise ValueError("the lock batch body names no consumerGroup")
    queues = document.get("mqSet") or []
    if not isinstance(queues, list):
        raise ValueError("the lock batch body's mqSet is not a list")
    wants: list[Wanted] = [(Resource.group(document["consumerGroup"]), (Action.SUB,))]
    for queue in queues:
        topic = queue.get("topic") if isinstance(queue, dict) else None
        if not isinstance(topic, str):
            raise ValueError("a queue of the lock batch body names no topic")
        if not is_retry_topic(topic):
            wants.append((Resource.topic(topic), (Action.SUB,)))
    return wants


def user_wants(
    code: int,
    ext_fields: Mapping[str, str] | None,
    needed: Sequence[tuple[str, Permission]],
    body: bytes = b"",
) -> list[Wanted]:
    """What a 5.x user needs for a remoting request (not admin-only).

    The cases RocketMQ 5's DefaultAuthorizationContextBuilder.build writes
    out (apache/rocketmq at 8fc57f1468) where they differ from the ACL 1.0
    derivation: the consumer offsets (Sub or Get to read, Sub or Update to
    write, on the topic unless it is a retry topic, and on the group), the
    consumer list (Sub or Get on the group), a message query (Sub or Get on
    the topic) and END_TRANSACTION (Pub on the topic it names); then the
    codes judged by their headers' annotations (``_ANNOTATED``: POP and its
    acknowledgements, the offset and message lookups) and the queue locks
    (``lock_wants``, from `body`: ValueError if it is not a lock body).
    Everything else is `needed` as ``_wanted`` reads it."""
    fields = ext_fields or {}
    if code in _LOCK_CODES:
        return lock_wants(body)
    actions = _TOPIC_AND_GROUP_ACTIONS.get(code)
    if actions is not None:
        wants: list[Wanted] = []
        topic, group = fields.get("topic"), fields.get("consumerGroup")
        if topic is not None and not is_retry_topic(topic):
            wants.append((Resource.topic(topic), actions))
        if group is not None:
            wants.append((Resource.group(group), actions))
        return wants
    if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        group = fields.get("consumerGroup")
        return [] if group is None else [(Resource.group(group), (Action.SUB, Action.GET))]
    if code == RequestCode.QUERY_MESSAGE:
        topic = fields.get("topic")
        return [] if topic is None else [(Resource.topic(topic), (Action.SUB, Action.GET))]
    if code == RequestCode.END_TRANSACTION:
        topic = fields.get("topic")
        return [(Resource.topic(topic), (Action.PUB,))] if topic and topic.strip() else []
    annotated = _annotated(code, fields)
    if annotated is not None:
        return annotated
    return [(resource, (action,)) for resource, action in map(_wanted_pair, needed)]


def _wanted_pair(item: tuple[str, Permission]) -> tuple[Resource, Action]:
    return _wanted(*item)


def authorize_user(
    state: AuthState,
    user: User,
    needed: Sequence[tuple[str, Permission]],
    host: str,
    *,
    admin_code: int | None = None,
    admin_resource: Resource | None = None,
    wants: Sequence[Wanted] | None = None,
) -> Denial | None:
    """None when `user` (authenticated, enabled) may do this from `host`, else why not.
    `admin_code`: the request is admin-only (its code picks the action), on
    `admin_resource` (``admin_target``; Cluster when not given). `wants`: what
    the request needs when the caller derived it (``user_wants``); else each
    of `needed`, one action each."""
    if user.is_super:
        return None
    if wants is None:
        wants = [(resource, (action,)) for resource, action in map(_wanted_pair, needed)]
    if admin_code is not None:
        wants = [(admin_resource or Resource.cluster(), (admin_action(admin_code),))]
    entries = state.entries_of(user.username)
    for resource, actions in wants:
        entry = deciding_entry(entries, resource, actions, host)
        if entry is None or entry.decision is Decision.DENY:
            detail = "no matched policies." if entry is None else "the decision is deny."
            reason = Reason.NOT_ADMIN if admin_code is not None else Reason.NO_PERMISSION
            return Denial(
                reason,
                f"User:{user.username} has no permission to access {resource.key} "
                f"from {host}, {detail}",
            )
    return None
