"""One grpc method handler rebuilt around a wrapped behavior: what a server
interceptor does to a handler, whatever kind of RPC it serves.

An interceptor gets the servicer's handler (an RpcMethodHandler with one
behavior set: unary_unary, unary_stream, stream_unary or stream_stream) and
returns a handler of the same kind, same (de)serializers, whose behavior is
its own wrapper around the servicer's. The interceptors (metrics, ACL) say
only how to wrap each kind they care about; a kind they give no wrapper for
is returned as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

__all__ = ["Behavior", "Wrapper", "rewrapped"]

Behavior = Callable[..., Any]
"""A handler's behavior: (request or request iterator, context) -> response(s)."""
Wrapper = Callable[[Behavior], Behavior]


def rewrapped(
    handler: Any,
    *,
    unary_unary: Wrapper | None = None,
    unary_stream: Wrapper | None = None,
    stream_stream: Wrapper | None = None,
) -> Any:
    """`handler` with its behavior passed through the wrapper for its kind;
    `handler` itself when there is no wrapper for its kind (or no handler)."""
    if handler is None:
        return None
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None and unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary_unary(handler.unary_unary), **kwargs)
    if handler.unary_stream is not None and unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(unary_stream(handler.unary_stream), **kwargs)
    if handler.stream_stream is not None and stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(stream_stream(handler.stream_stream), **kwargs)
    return handler  # client streaming: MessagingService has none
