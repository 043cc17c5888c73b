"""Recognise a peer that does not speak RocketMQ remoting, from its first bytes.

A remoting frame starts with its total length and header length (two int32),
and the header is never empty. A wrong port answers otherwise, and the first
few bytes tell what it speaks (checked before the frame decoder sees them,
since as a length they mean a large frame that would be waited for, or one
refused as too large without saying why):

* HTTP/2 (gRPC, such as the RocketMQ 5 endpoint): a server opens with a
  SETTINGS frame (RFC 9113 4.1 and 6.5): 24-bit length (a multiple of 6),
  type 0x4, flags 0 or 1 (ACK), stream id 0. As remoting that would be a
  header length of 0, which no remoting peer sends. A client opens with the
  preface "PRI * HTTP/2.0".
* HTTP/1.x: "HTTP/1." (a response) or a request line ("GET /", "POST /"...).
* TLS: a record of type handshake (22) or alert (21), version 3.x.

Bytes in, a name out; nothing else (sans-IO).
"""

from __future__ import annotations

__all__ = ["SNIFF_BYTES", "foreign_protocol"]

SNIFF_BYTES = 14
"""Bytes that tell every protocol below apart from remoting (most need fewer)."""

_HTTP2_SETTINGS = 0x4
_HTTP2_FRAME_HEADER = 9
_HTTP1_PREFIXES = (b"HTTP/1.", b"GET /", b"POST /", b"PUT /", b"HEAD /", b"DELETE /")
_TLS_RECORD_TYPES = (21, 22)


def foreign_protocol(head: bytes) -> str | None:
    """The protocol ("HTTP/2", "HTTP/1.x" or "TLS") whose opening `head`, the
    first bytes of a stream, is; None for remoting or too few bytes to tell."""
    if head.startswith(b"PRI * HTTP/2.0"):
        return "HTTP/2"
    if any(head.startswith(prefix) for prefix in _HTTP1_PREFIXES):
        return "HTTP/1.x"
    if len(head) >= 3 and head[0] in _TLS_RECORD_TYPES and head[1] == 3 and head[2] <= 4:
        return "TLS"
    if len(head) >= _HTTP2_FRAME_HEADER and _is_http2_settings(head):
        return "HTTP/2"
    return None


def _is_http2_settings(head: bytes) -> bool:
    length = int.from_bytes(head[0:3], "big")
    return (
        head[3] == _HTTP2_SETTINGS
        and head[4] in (0, 1)
        and head[5:9] == b"\0\0\0\0"
        and length % 6 == 0
    )
