"""What each gRPC request touches: the (resource, permission) pairs ACL 1.0 checks.

A client that is admitted (or refused) by a RocketMQ 5 proxy with a given
``plain_acl.yml`` must be admitted (or refused) here, so the table is
RocketMQ's: rocketmq-all-5.2.0 ``acl/.../plain/PlainAccessResource.java``
``parse(GeneratedMessageV3, AuthenticationHeader)``, the gRPC twin of the
remoting table in ``tidemq.acl.resources``. A group is its retry topic
``%RETRY%G``, as there.

    RPC                       needs (5.2.0)
    SendMessage               PUB on the topic
    EndTransaction            PUB on the topic
    QueryRoute                ANY (PUB or SUB) on the topic
    QueryAssignment           SUB on the topic and the group
    ReceiveMessage            SUB on the topic and the group
    AckMessage                SUB on the topic and the group
    ChangeInvisibleDuration   SUB on the topic and the group
    ForwardMessageToDLQ       SUB on the topic and the group
    Heartbeat                 a consumer: SUB on its group; a producer: nothing
    NotifyClientTermination   SUB on the group
    Telemetry (each command)  settings: PUB on each publishing topic, SUB on the
                              subscription's group and topics; other commands: nothing

Where tidemq differs, on purpose (each safer or needed by what tidemq serves):

- SendMessage with messages for several topics: Java refuses the request
  ("messages' topic is not consistent"); tidemq's endpoint sends each
  message to its own topic, so PUB is needed on every topic named.
- RecallMessage (newer than 5.2.0): PUB on the topic, as remoting's
  RECALL_MESSAGE. PullMessage, UpdateOffset, GetOffset, SyncLiteSubscription:
  SUB on the topic and the group, as remoting's PULL_MESSAGE and
  UPDATE_CONSUMER_OFFSET; QueryOffset (no group): SUB on the topic. Java
  maps none of them, which lets any signed account through.
- A blank group adds nothing for NotifyClientTermination (a producer sends
  none; 5.2.0 would check ``%RETRY%`` and refuse it, 5.3.0's
  ``auth/.../DefaultAuthorizationContextBuilder.java`` skips it), and every
  consumer client type (pull and lite ones too) needs SUB on its group in a
  Heartbeat.
- Names are taken as the endpoint uses them, without the request's
  namespace (Java wraps ``namespace%name``; tidemq has no namespaces).

An RPC not in the table needs no permission beyond authentication; a unit
test keeps every RPC of the service in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.acl.permissions import Permission
from tidemq.common.names import retry_topic_of

__all__ = ["RPCS", "AccessError", "needed_permissions", "response_type", "rpc_name"]

SERVICE = "apache.rocketmq.v2.MessagingService"

_CONSUMERS = frozenset(
    int(pb.ClientType.Value(name))
    for name in (
        "PUSH_CONSUMER",
        "SIMPLE_CONSUMER",
        "PULL_CONSUMER",
        "LITE_PUSH_CONSUMER",
        "LITE_SIMPLE_CONSUMER",
    )
)

Needs = list[tuple[str, Permission]]


class AccessError(ValueError):
    """A request whose resources cannot be told (Java's AclException from parse)."""


def _topic(name: str, perm: Permission) -> Needs:
    return [(name, perm)]


def _group(name: str) -> Needs:
    return [(retry_topic_of(name), Permission.SUB)]


def _sub(topic: str, group: str) -> Needs:
    return _group(group) + _topic(topic, Permission.SUB)


def _send(request: Any) -> Needs:
    topics = dict.fromkeys(message.topic.name for message in request.messages)
    return [(topic, Permission.PUB) for topic in topics]


def _heartbeat(request: Any) -> Needs:
    if request.client_type not in _CONSUMERS:
        return []
    if not request.HasField("group"):
        raise AccessError("Consumer heartbeat doesn't have group")
    return _group(request.group.name)


def _telemetry(command: Any) -> Needs:
    if not command.HasField("settings"):
        return []
    settings = command.settings
    needs: Needs = []
    if settings.HasField("publishing"):
        needs += [(topic.name, Permission.PUB) for topic in settings.publishing.topics]
    if settings.HasField("subscription"):
        subscription = settings.subscription
        needs += _group(subscription.group.name)
        needs += [(entry.topic.name, Permission.SUB) for entry in subscription.subscriptions]
    if not (settings.HasField("publishing") or settings.HasField("subscription")):
        raise AccessError("settings command doesn't have publishing or subscription")
    return needs


def _terminate(request: Any) -> Needs:
    return _group(request.group.name) if request.group.name.strip() else []


_Rule = Callable[[Any], Needs]

RPCS: dict[str, tuple[_Rule, Any]] = {
    "QueryRoute": (lambda r: _topic(r.topic.name, Permission.ANY), spb.QueryRouteResponse),
    "Heartbeat": (_heartbeat, spb.HeartbeatResponse),
    "SendMessage": (_send, spb.SendMessageResponse),
    "QueryAssignment": (lambda r: _sub(r.topic.name, r.group.name), spb.QueryAssignmentResponse),
    "ReceiveMessage": (
        lambda r: _sub(r.message_queue.topic.name, r.group.name),
        spb.ReceiveMessageResponse,
    ),
    "AckMessage": (lambda r: _sub(r.topic.name, r.group.name), spb.AckMessageResponse),
    "ForwardMessageToDeadLetterQueue": (
        lambda r: _sub(r.topic.name, r.group.name),
        spb.ForwardMessageToDeadLetterQueueResponse,
    ),
    "PullMessage": (
        lambda r: _sub(r.message_queue.topic.name, r.group.name),
        spb.PullMessageResponse,
    ),
    "UpdateOffset": (
        lambda r: _sub(r.message_queue.topic.name, r.group.name),
        spb.UpdateOffsetResponse,
    ),
    "GetOffset": (
        lambda r: _sub(r.message_queue.topic.name, r.group.name),
        spb.GetOffsetResponse,
    ),
    "QueryOffset": (
        lambda r: _topic(r.message_queue.topic.name, Permission.SUB),
        spb.QueryOffsetResponse,
    ),
    "EndTransaction": (lambda r: _topic(r.topic.name, Permission.PUB), spb.EndTransactionResponse),
    "Telemetry": (_telemetry, spb.TelemetryCommand),
    "NotifyClientTermination": (_terminate, spb.NotifyClientTerminationResponse),
    "ChangeInvisibleDuration": (
        lambda r: _sub(r.topic.name, r.group.name),
        spb.ChangeInvisibleDurationResponse,
    ),
    "RecallMessage": (lambda r: _topic(r.topic.name, Permission.PUB), spb.RecallMessageResponse),
    "SyncLiteSubscription": (
        lambda r: _sub(r.topic.name, r.group.name),
        spb.SyncLiteSubscriptionResponse,
    ),
}
"""RPC name -> (its needs, its response type: a refusal is that response with a status)."""


def rpc_name(method: str) -> str | None:
    """ "SendMessage" for "/apache.rocketmq.v2.MessagingService/SendMessage", else None."""
    service, _, name = method.lstrip("/").rpartition("/")
    return name if service == SERVICE else None


def needed_permissions(rpc: str, request: Any) -> Needs:
    """The (resource, permission) pairs `request` of `rpc` needs; a resource
    named twice keeps its last permission (Java's HashMap). AccessError when
    they cannot be told."""
    entry = RPCS.get(rpc)
    if entry is None:
        return []
    try:
        needs = entry[0](request)
    except AccessError:
        raise
    except (AttributeError, ValueError) as exc:  # a message of another type
        raise AccessError(f"{rpc}: {exc}") from None
    return list(dict(needs).items())


def response_type(rpc: str) -> Any:
    """The response message class of `rpc` (None when not in the table)."""
    entry = RPCS.get(rpc)
    return None if entry is None else entry[1]
