"""The RPC -> (resource, permission) table: RocketMQ 5.2.0's PlainAccessResource.parse
for gRPC messages, with tidemq's stated differences; every RPC of the service is in it."""

from __future__ import annotations

from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.acl.permissions import Permission
from tidemq.grpc.access import RPCS, AccessError, needed_permissions, response_type, rpc_name

PUB, SUB, ANY = Permission.PUB, Permission.SUB, Permission.ANY
T, G = "Orders", "Billing"
RETRY_G = f"%RETRY%{G}"


def res(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def queue(topic: str) -> pb.MessageQueue:
    return pb.MessageQueue(topic=res(topic))


def settings(**fields: Any) -> spb.TelemetryCommand:
    return spb.TelemetryCommand(settings=pb.Settings(**fields))


CASES: list[tuple[str, Any, list[tuple[str, Permission]]]] = [
    ("QueryRoute", spb.QueryRouteRequest(topic=res(T)), [(T, ANY)]),
    (
        "Heartbeat",
        spb.HeartbeatRequest(group=res(G), client_type=pb.ClientType.SIMPLE_CONSUMER),
        [(RETRY_G, SUB)],
    ),
    (
        "Heartbeat",
        spb.HeartbeatRequest(group=res(G), client_type=pb.ClientType.PUSH_CONSUMER),
        [(RETRY_G, SUB)],
    ),
    ("Heartbeat", spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), []),
    (
        "SendMessage",
        spb.SendMessageRequest(messages=[pb.Message(topic=res(T)), pb.Message(topic=res(T))]),
        [(T, PUB)],
    ),
    (
        "SendMessage",  # tidemq sends each to its own topic: PUB on each
        spb.SendMessageRequest(messages=[pb.Message(topic=res(T)), pb.Message(topic=res("B"))]),
        [(T, PUB), ("B", PUB)],
    ),
    ("SendMessage", spb.SendMessageRequest(), []),
    (
        "QueryAssignment",
        spb.QueryAssignmentRequest(topic=res(T), group=res(G)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    (
        "ReceiveMessage",
        spb.ReceiveMessageRequest(group=res(G), message_queue=queue(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    ("AckMessage", spb.AckMessageRequest(group=res(G), topic=res(T)), [(RETRY_G, SUB), (T, SUB)]),
    (
        "ForwardMessageToDeadLetterQueue",
        spb.ForwardMessageToDeadLetterQueueRequest(group=res(G), topic=res(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    (
        "ChangeInvisibleDuration",
        spb.ChangeInvisibleDurationRequest(group=res(G), topic=res(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    ("EndTransaction", spb.EndTransactionRequest(topic=res(T)), [(T, PUB)]),
    ("RecallMessage", spb.RecallMessageRequest(topic=res(T)), [(T, PUB)]),
    (
        "PullMessage",
        spb.PullMessageRequest(group=res(G), message_queue=queue(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    (
        "UpdateOffset",
        spb.UpdateOffsetRequest(group=res(G), message_queue=queue(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    (
        "GetOffset",
        spb.GetOffsetRequest(group=res(G), message_queue=queue(T)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    ("QueryOffset", spb.QueryOffsetRequest(message_queue=queue(T)), [(T, SUB)]),
    (
        "SyncLiteSubscription",
        spb.SyncLiteSubscriptionRequest(topic=res(T), group=res(G)),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    ("NotifyClientTermination", spb.NotifyClientTerminationRequest(group=res(G)), [(RETRY_G, SUB)]),
    ("NotifyClientTermination", spb.NotifyClientTerminationRequest(), []),  # a producer
    (
        "Telemetry",
        settings(publishing=pb.Publishing(topics=[res(T), res("B")])),
        [(T, PUB), ("B", PUB)],
    ),
    (
        "Telemetry",
        settings(
            subscription=pb.Subscription(
                group=res(G), subscriptions=[pb.SubscriptionEntry(topic=res(T))]
            )
        ),
        [(RETRY_G, SUB), (T, SUB)],
    ),
    ("Telemetry", spb.TelemetryCommand(status=pb.Status(code=pb.Code.OK)), []),
]


@pytest.mark.parametrize(("rpc", "request_", "needed"), CASES)
def test_each_rpc_needs_what_rocketmq_5_says(rpc: str, request_: Any, needed: Any) -> None:
    assert needed_permissions(rpc, request_) == needed


def test_every_rpc_of_the_service_is_in_the_table_with_its_response_type() -> None:
    service = spb.DESCRIPTOR.services_by_name["MessagingService"]
    assert set(RPCS) == {method.name for method in service.methods}
    for method in service.methods:
        assert response_type(method.name).DESCRIPTOR is method.output_type
    assert {rpc for rpc, _, _ in CASES} == set(RPCS)  # every RPC has a case above


@pytest.mark.parametrize(
    ("rpc", "request_", "why"),
    [
        (
            "Heartbeat",
            spb.HeartbeatRequest(client_type=pb.ClientType.SIMPLE_CONSUMER),
            "Consumer heartbeat doesn't have group",
        ),
        (
            "Telemetry",
            settings(client_type=pb.ClientType.PRODUCER),
            "settings command doesn't have publishing or subscription",
        ),
        ("SendMessage", spb.QueryRouteRequest(topic=res(T)), "SendMessage"),
    ],
)
def test_requests_java_cannot_parse_are_refused(rpc: str, request_: Any, why: str) -> None:
    with pytest.raises(AccessError, match=why):
        needed_permissions(rpc, request_)


def test_rpc_names() -> None:
    assert rpc_name("/apache.rocketmq.v2.MessagingService/SendMessage") == "SendMessage"
    assert rpc_name("/grpc.health.v1.Health/Check") is None
    assert rpc_name("") is None
    assert needed_permissions("NoSuchRpc", spb.QueryRouteRequest()) == []
    assert response_type("NoSuchRpc") is None
