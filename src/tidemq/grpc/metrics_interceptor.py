"""The gRPC endpoint's share of rocketmq_rpc_latency: every call timed, by RPC and status.

RocketMQ 5 times remoting requests only (the proxy that serves gRPC records
no rpc latency); tidemq times its gRPC calls into the same histogram with
protocol_type "grpc": request_code is the RPC's name in snake case
("send_message", "receive_message"), response_code the apache.rocketmq.v2
`Code` of the response's status lower-cased ("ok", "message_not_found"),
"exception" when the servicer raised. A streamed call (ReceiveMessage,
PullMessage) is timed to its end and takes the last status it sent; those
two long-poll by design, so they count as is_long_polling. Telemetry (one
stream per client for its lifetime) is not timed.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.common.rpc_stats import RpcStats
from tidemq.grpc.access import rpc_name
from tidemq.grpc.handler_wrap import Behavior, rewrapped

__all__ = ["EXCEPTION", "MetricsInterceptor", "grpc_rpc_stats"]

EXCEPTION = -1
"""The response code recorded when the servicer raised."""
_LONG_POLLING = frozenset({"ReceiveMessage", "PullMessage"})
_UNTIMED = frozenset({"Telemetry"})
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def rpc_label(rpc: str) -> str:
    """ "send_message" for "SendMessage"."""
    return _CAMEL.sub("_", rpc).lower()


def status_label(code: int) -> str:
    """ "ok" for 20000; "exception" for EXCEPTION; the number for unknown codes."""
    if code == EXCEPTION:
        return "exception"
    try:
        return str(pb.Code.Name(code)).lower()
    except ValueError:
        return str(code)


def grpc_rpc_stats() -> RpcStats:
    """An RpcStats naming its keys as this module records them."""
    return RpcStats("grpc", rpc_label, status_label)


def _status_code(response: Any) -> int | None:
    status = getattr(response, "status", None)
    if status is None:
        return None
    try:
        if not response.HasField("status"):
            return None
    except ValueError:  # a message whose status is no sub-message field
        return None
    return int(status.code)


class MetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every MessagingService handler but Telemetry with a timer."""

    def __init__(self, stats: RpcStats) -> None:
        self.stats = stats

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        rpc = rpc_name(handler_call_details.method)
        if rpc is None or rpc in _UNTIMED:
            return handler
        return rewrapped(
            handler,
            unary_unary=lambda behavior: self._unary(rpc, behavior),
            unary_stream=lambda behavior: self._unary_stream(rpc, behavior),
        )

    def _unary(self, rpc: str, behavior: Behavior) -> Behavior:
        stats = self.stats

        async def timed(request: Any, context: Any) -> Any:
            started = time.monotonic()
            code: int = pb.Code.CODE_UNSPECIFIED
            try:
                response = await behavior(request, context)
                found = _status_code(response)
                if found is not None:
                    code = found
                return response
            except Exception:
                code = EXCEPTION
                raise
            finally:
                stats.record(rpc, code, (time.monotonic() - started) * 1000.0)

        return timed

    def _unary_stream(self, rpc: str, behavior: Behavior) -> Behavior:
        stats = self.stats
        long_polling = rpc in _LONG_POLLING

        async def timed(request: Any, context: Any) -> AsyncIterator[Any]:
            started = time.monotonic()
            code: int = pb.Code.CODE_UNSPECIFIED
            try:
                async for response in behavior(request, context):
                    found = _status_code(response)
                    if found is not None:
                        code = found
                    yield response
            except Exception:
                code = EXCEPTION
                raise
            finally:
                stats.record(rpc, code, (time.monotonic() - started) * 1000.0, long_polling)

        return timed
