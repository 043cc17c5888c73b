"""The interceptor in front of the gRPC handlers (fake handlers and context: pure logic):
a refusal is the RPC's response with UNAUTHORIZED / FORBIDDEN and nothing reaches the
handler; each Telemetry command is authenticated again (without the clock window) and
authorized; garbage headers are a refusal, never a crash."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.acl.gate import AclGate
from tidemq.acl.grpc_auth import client_headers
from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.validator import AclPolicy
from tidemq.common.clock import ManualClock
from tidemq.grpc.acl_interceptor import AclInterceptor, peer_host

Code = pb.Code
SERVICE = "/apache.rocketmq.v2.MessagingService/"
POLICY = AclPolicy(
    parse_plain_acl(
        "accounts:\n"
        "  - accessKey: appKey0001\n"
        "    secretKey: appSecret0001\n"
        "    defaultTopicPerm: DENY\n"
        "    defaultGroupPerm: DENY\n"
        "    topicPerms: [Orders=PUB|SUB, Audit=SUB]\n"
        "    groupPerms: [Billing=SUB]\n"
    )
)


@dataclass
class Context:
    metadata: list[tuple[str, str]]
    address: str = "ipv4:127.0.0.1:50000"

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self.metadata

    def peer(self) -> str:
        return self.address


@dataclass
class Details:
    method: str
    invocation_metadata: tuple[Any, ...] = ()


@dataclass
class Handlers:
    """The servicer stand-in: records what reached it."""

    seen: list[Any] = field(default_factory=list)

    async def unary(self, request: Any, context: Any) -> Any:
        self.seen.append(request)
        return spb.SendMessageResponse(status=pb.Status(code=Code.OK))

    async def stream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.seen.append(request)
        yield spb.ReceiveMessageResponse(status=pb.Status(code=Code.OK))

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for command in requests:
            self.seen.append(command)
            yield spb.TelemetryCommand(status=pb.Status(code=Code.OK))


CLOCK = ManualClock()


def signed(ak: str = "appKey0001", sk: str = "appSecret0001") -> list[tuple[str, str]]:
    now = datetime.fromtimestamp(CLOCK.now_ms() / 1000, UTC)
    return list(client_headers(ak, sk, now).items())


async def wrapped(
    rpc: str, handlers: Handlers, gate: AclGate | None = None, clock: ManualClock = CLOCK
) -> Any:
    interceptor = AclInterceptor(gate or AclGate(POLICY), clock)
    if rpc == "Telemetry":
        inner = grpc.stream_stream_rpc_method_handler(handlers.telemetry)
    elif rpc == "ReceiveMessage":
        inner = grpc.unary_stream_rpc_method_handler(handlers.stream)
    else:
        inner = grpc.unary_unary_rpc_method_handler(handlers.unary)

    async def continuation(details: Any) -> Any:
        return inner

    return await interceptor.intercept_service(continuation, Details(SERVICE + rpc))


def send_request(topic: str) -> Any:
    return spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=b"x")])


async def test_an_allowed_send_reaches_the_handler() -> None:
    handlers = Handlers()
    handler = await wrapped("SendMessage", handlers)
    response = await handler.unary_unary(send_request("Orders"), Context(signed()))
    assert response.status.code == Code.OK
    assert len(handlers.seen) == 1


@pytest.mark.parametrize(
    ("metadata", "topic", "code", "text"),
    [
        ([], "Orders", Code.UNAUTHORIZED, "No accessKey is configured"),
        (signed(sk="wrongSecret1"), "Orders", Code.UNAUTHORIZED, "Check signature failed"),
        (signed(ak="nobody0001"), "Orders", Code.UNAUTHORIZED, "No acl config for nobody0001"),
        (signed(), "Audit", Code.FORBIDDEN, "No default permission for topic:Audit"),
    ],
)
async def test_a_refusal_is_the_rpcs_response_with_a_status(
    metadata: list[tuple[str, str]], topic: str, code: int, text: str
) -> None:
    handlers = Handlers()
    handler = await wrapped("SendMessage", handlers)
    response = await handler.unary_unary(send_request(topic), Context(metadata))
    assert isinstance(response, spb.SendMessageResponse)
    assert response.status.code == code
    assert text in response.status.message
    assert handlers.seen == []


async def test_a_refused_receive_is_one_response_with_the_status() -> None:
    handlers = Handlers()
    handler = await wrapped("ReceiveMessage", handlers)
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name="Other"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Orders")),
    )
    responses = [r async for r in handler.unary_stream(request, Context(signed()))]
    assert [r.status.code for r in responses] == [Code.FORBIDDEN]
    assert responses[0].status.message == "No default permission for group:Other"
    assert handlers.seen == []


async def commands(*items: Any) -> AsyncIterator[Any]:
    for item in items:
        yield item


def publishing(*topics: str) -> Any:
    return spb.TelemetryCommand(
        settings=pb.Settings(publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]))
    )


async def test_each_telemetry_command_is_authorized() -> None:
    handlers = Handlers()
    handler = await wrapped("Telemetry", handlers)
    stream = handler.stream_stream(
        commands(publishing("Orders"), publishing("Audit"), publishing("Orders")),
        Context(signed()),
    )
    replies = [reply async for reply in stream]
    assert [r.status.code for r in replies] == [Code.OK, Code.FORBIDDEN]
    assert replies[-1].status.message == "No default permission for topic:Audit"
    assert handlers.seen == [publishing("Orders")]  # the refused one and after: not passed on


async def test_each_telemetry_command_is_authenticated_again_without_the_clock_window() -> None:
    """RocketMQ 5.3's proxy runs authentication on every message of the stream; its
    headers are the stream's, so a secret changed since it began refuses the next
    command, while its date, checked at the start, is not checked again."""
    gate, clock = AclGate(POLICY), ManualClock()
    handlers = Handlers()
    handler = await wrapped("Telemetry", handlers, gate, clock)
    moved = AclPolicy(
        parse_plain_acl(
            "accounts:\n"
            "  - {accessKey: appKey0001, secretKey: newSecret0001, defaultTopicPerm: PUB}\n"
        )
    )

    async def stream() -> AsyncIterator[Any]:
        yield publishing("Orders")
        clock.advance(3600)  # an hour later: past the 15-minute window
        yield publishing("Orders")
        gate.use(moved)  # the account's secret changes
        yield publishing("Orders")
        yield publishing("Orders")

    now = datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
    metadata = list(client_headers("appKey0001", "appSecret0001", now).items())
    replies = [r async for r in handler.stream_stream(stream(), Context(metadata))]
    assert [r.status.code for r in replies] == [Code.OK, Code.OK, Code.UNAUTHORIZED]
    assert replies[-1].status.message == "Check signature failed for accessKey=appKey0001"
    assert handlers.seen == [publishing("Orders")] * 2
    assert gate.refusals()["bad_signature"] == 1


async def test_an_unauthenticated_telemetry_stream_gets_one_refusal() -> None:
    handlers = Handlers()
    handler = await wrapped("Telemetry", handlers)
    replies = [r async for r in handler.stream_stream(commands(publishing("Orders")), Context([]))]
    assert [r.status.code for r in replies] == [Code.UNAUTHORIZED]
    assert handlers.seen == []


async def test_other_services_are_not_wrapped() -> None:
    interceptor = AclInterceptor(AclGate(POLICY), CLOCK)
    inner = grpc.unary_unary_rpc_method_handler(Handlers().unary)

    async def continuation(details: Any) -> Any:
        return inner

    assert await interceptor.intercept_service(continuation, Details("/x.Y/Z")) is inner

    async def unknown(details: Any) -> None:
        return None

    assert await interceptor.intercept_service(unknown, Details(SERVICE + "SendMessage")) is None


async def test_address_rules_see_the_client_behind_the_tls_front() -> None:
    """Behind the front grpc's peer is a Unix socket; the interceptor reads the
    client's address through `real_peer`, and an unknown relayed peer matches no rule."""
    policy = AclPolicy(
        parse_plain_acl(
            "globalWhiteRemoteAddresses: [10.0.0.*]\n"
            "accounts:\n"
            "  - accessKey: appKey0001\n"
            "    secretKey: appSecret0001\n"
            "    whiteRemoteAddress: 192.168.0.*\n"
            "    topicPerms: [Orders=PUB]\n"
        )
    )
    relayed = {"unix:/tmp/tidemq-grpc-x/c1": "ipv4:10.0.0.7:5000"}
    interceptor = AclInterceptor(
        AclGate(policy), CLOCK, real_peer=lambda peer: relayed.get(peer, peer)
    )
    handlers = Handlers()
    inner = grpc.unary_unary_rpc_method_handler(handlers.unary)

    async def continuation(details: Any) -> Any:
        return inner

    handler = await interceptor.intercept_service(continuation, Details(SERVICE + "SendMessage"))
    unsigned = Context([], "unix:/tmp/tidemq-grpc-x/c1")
    allowed = await handler.unary_unary(send_request("Orders"), unsigned)
    assert allowed.status.code == Code.OK  # 10.0.0.7 is globally white-listed
    stale = Context([], "unix:/tmp/tidemq-grpc-x/c9")
    refused = await handler.unary_unary(send_request("Orders"), stale)
    assert refused.status.code == Code.UNAUTHORIZED
    assert len(handlers.seen) == 1


def test_peer_hosts() -> None:
    assert peer_host("ipv4:10.0.0.1:5000") == "10.0.0.1"
    assert peer_host("ipv6:%5B::1%5D:5000") == "::1"
    assert peer_host("ipv6:[::ffff:10.0.0.1]:5000") == "::ffff:10.0.0.1"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError, match="skew"):
        AclInterceptor(AclGate(POLICY), CLOCK, -1)


HEADER_TEXT = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda parts: "MQv2-HMAC-SHA1 " + ", ".join(parts),
        st.lists(
            st.one_of(
                st.sampled_from(["Credential=", "Signature=", "SignedHeaders="]).flatmap(
                    lambda name: st.text(max_size=60).map(lambda v, n=name: n + v)
                ),
                st.text(max_size=30),
            ),
            max_size=5,
        ),
    ),
    st.just("MQv2-HMAC-SHA1 Credential=appKey0001, Signature=" + "0" * 10_000),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    authorization=st.one_of(st.none(), HEADER_TEXT),
    date=st.one_of(st.none(), st.text(max_size=40), st.just("20231114T221320Z")),
    peer=st.one_of(st.text(max_size=40), st.just("ipv4:127.0.0.1:1")),
)
async def test_garbage_headers_are_a_refusal_never_a_crash(
    authorization: str | None, date: str | None, peer: str
) -> None:
    metadata = [
        (k, v)
        for k, v in (("authorization", authorization), ("x-mq-date-time", date))
        if v is not None
    ]
    handlers = Handlers()
    handler = await wrapped("SendMessage", handlers)
    response = await handler.unary_unary(send_request("Orders"), Context(metadata, peer))
    assert response.status.code == Code.UNAUTHORIZED, response.status
    assert response.status.message
    assert handlers.seen == []
