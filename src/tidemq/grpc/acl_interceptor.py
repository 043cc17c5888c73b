"""Access control in front of every gRPC call: the one place the endpoint checks it.

A server interceptor wraps each MessagingService handler: the call's
metadata is authenticated when it starts (``AclGate.grpc_authenticate``),
and each request message is authorized against the policy in force then
(``AclGate.grpc_authorize``, with the resources of ``tidemq.grpc.access``),
before the servicer sees it. A Telemetry stream's commands are each
authenticated again as well, as RocketMQ 5.3's proxy does (its pipeline runs
on every message: rocketmq-all-5.3.3 ``proxy/.../grpc/v2/
GrpcMessagingApplication.java`` telemetry), without the clock window, which
is the stream's start's business. The gate is the remoting port's, so both
protocols share one policy, its reloads, its counters and its log lines.

A refusal is the RPC's own response with only a ``Status``, gRPC status OK,
as the RocketMQ 5 proxy answers since ACL 2.0 (rocketmq-all-5.3.0
``proxy/.../grpc/v2/GrpcMessagingApplication.java`` writeResponse with
``ResponseBuilder.buildStatus(Throwable)``): the official clients read it
and raise ``UnauthorizedException`` / ``ForbiddenException`` with the
message (rocketmq-python-client ``messaging_result_checker.py``,
rocketmq-client-nodejs ``StatusChecker``). Codes: UNAUTHORIZED (40100) when
the caller is not established, FORBIDDEN (40300) when it may not do this,
BAD_REQUEST (40000) when the request's resources cannot be told. The 5.3.0
proxy answers UNAUTHORIZED to permission refusals too; FORBIDDEN is the
protocol's code for them (and what issue #17 asks), so a client can tell a
wrong key from a missing grant. ACL 1.0 in rocketmq-all-5.2.0 ended the
call with a bare gRPC PERMISSION_DENIED (``proxy/.../grpc/interceptor/
AuthenticationInterceptor.java``), which the clients report without a reason.

The caller's address (``whiteRemoteAddress``, ``globalWhiteRemoteAddresses``,
source IPs of the 5.x ACLs) is grpc's peer read through ``real_peer``: behind
the TLS front (tls_front.py) grpc sees the front, and the front records the
client (relayed_peers.py).

Telemetry: a refused call gets one TelemetryCommand with the status and
ends; a refused command (its user deleted or disabled or its password
changed since the stream began, or a Settings naming a topic the caller may
not use) is not passed on, and the stream ends with its status, as Java's
``ResponseWriter.write`` ends it (onNext then onCompleted).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.acl.gate import AclGate
from tidemq.acl.grpc_validator import GrpcCaller
from tidemq.acl.validator import Denial, Reason
from tidemq.common.clock import Clock
from tidemq.grpc.access import needed_permissions, response_type, rpc_name
from tidemq.grpc.handler_wrap import Behavior, rewrapped

__all__ = ["DEFAULT_MAX_SKEW_S", "AclInterceptor", "peer_host", "refusal_status"]

DEFAULT_MAX_SKEW_S = 900.0
"""15 minutes, the window AWS SigV4 gives the same kind of signed date: wide
enough for hosts whose clocks drift, narrow enough that a captured header
(the signature covers only the date, not the request) is soon worthless."""


def peer_host(peer: str) -> str:
    """The address in a gRPC peer string: "ipv4:10.0.0.1:5000" -> "10.0.0.1",
    "ipv6:%5B::1%5D:5000" -> "::1"; anything else is returned as given."""
    kind, _, rest = unquote(peer).partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] if rest.startswith("[") else rest
        return host.strip("[]")
    return peer


def refusal_status(denial: Denial) -> pb.Status:
    """The v2 Status a refusal is answered with."""
    if denial.reason is Reason.BAD_REQUEST:
        code = pb.Code.BAD_REQUEST
    elif denial.reason.authentication:
        code = pb.Code.UNAUTHORIZED
    else:
        code = pb.Code.FORBIDDEN
    return pb.Status(code=code, message=denial.remark)


def _metadata(context: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            found.setdefault(key.lower(), value)
    return found


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every MessagingService handler with the gate's checks."""

    def __init__(
        self,
        gate: AclGate,
        clock: Clock,
        max_skew_s: float = DEFAULT_MAX_SKEW_S,
        real_peer: Callable[[str], str] | None = None,
    ):
        """`real_peer`: grpc's peer string -> the client's (RelayedPeers.real); default as is."""
        if max_skew_s < 0:
            raise ValueError("the clock skew window must not be negative")
        self.gate = gate
        self.clock = clock
        self.max_skew_ms = int(max_skew_s * 1000)
        self.real_peer = real_peer

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        rpc = rpc_name(handler_call_details.method)
        if rpc is None:
            return handler
        return rewrapped(
            handler,
            unary_unary=lambda behavior: self._unary(rpc, behavior),
            unary_stream=lambda behavior: self._unary_stream(rpc, behavior),
            stream_stream=lambda behavior: self._stream_stream(rpc, behavior),
        )

    # -- the checks --------------------------------------------------------------------

    def _authenticate(self, rpc: str, context: Any) -> GrpcCaller | Denial:
        return self.gate.grpc_authenticate(
            rpc,
            _metadata(context),
            peer_host(self._peer(context)),
            self.clock.now_ms(),
            self.max_skew_ms,
        )

    def _peer(self, context: Any) -> str:
        peer = str(context.peer())
        return self.real_peer(peer) if self.real_peer is not None else peer

    def _authenticate_again(self, rpc: str, context: Any) -> GrpcCaller | Denial:
        """The stream's headers against the users and accounts now, without the window."""
        return self.gate.grpc_authenticate(
            rpc, _metadata(context), peer_host(self._peer(context)), self.clock.now_ms(), None
        )

    def _authorize(self, rpc: str, caller: GrpcCaller, request: Any) -> Denial | None:
        return self.gate.grpc_authorize(rpc, caller, lambda: needed_permissions(rpc, request))

    def _check(self, rpc: str, request: Any, context: Any) -> Denial | None:
        caller = self._authenticate(rpc, context)
        if isinstance(caller, Denial):
            return caller
        return self._authorize(rpc, caller, request)

    def _refusal(self, rpc: str, denial: Denial) -> Any:
        return response_type(rpc)(status=refusal_status(denial))

    # -- the wrappers ------------------------------------------------------------------

    def _unary(self, rpc: str, behavior: Behavior) -> Behavior:
        async def checked(request: Any, context: Any) -> Any:
            denial = self._check(rpc, request, context)
            if denial is not None:
                return self._refusal(rpc, denial)
            return await behavior(request, context)

        return checked

    def _unary_stream(self, rpc: str, behavior: Behavior) -> Behavior:
        async def checked(request: Any, context: Any) -> AsyncIterator[Any]:
            denial = self._check(rpc, request, context)
            if denial is not None:
                yield self._refusal(rpc, denial)
                return
            async for response in behavior(request, context):
                yield response

        return checked

    def _stream_stream(self, rpc: str, behavior: Behavior) -> Behavior:
        async def checked(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            caller = self._authenticate(rpc, context)
            if isinstance(caller, Denial):
                yield self._refusal(rpc, caller)
                return
            refused: list[Denial] = []

            async def admitted() -> AsyncIterator[Any]:
                async for request in requests:
                    again = self._authenticate_again(rpc, context)
                    if isinstance(again, Denial):
                        denial: Denial | None = again
                    else:
                        denial = self._authorize(rpc, again, request)
                    if denial is not None:
                        refused.append(denial)
                        return  # the servicer sees the stream end
                    yield request

            async for response in behavior(admitted(), context):
                yield response
            if refused:
                yield self._refusal(rpc, refused[0])

        return checked
