"""The request command of one send attempt, with a cheaper JSON header encoding.

`RemotingCommand.encode_parts` serves any command: it builds a header dict,
checks every field's range and type, then encodes. A send's header differs
between attempts only in the opaque, the flag and the extFields, so here the
text before the opaque is made once per (code, language, version) and the
rest is formatted around msgspec's encoding of the extFields: the same bytes
as the general encoder (tests/unit/client/test_send_frame.py pins them), for
about half its cost on every single-message send. Anything the shortcut does
not cover (a remark, a binary header, a non-str field, text that is not
plain ASCII, the stdlib codec chosen with TIDEMQ_HEADER_CODEC) goes the
general way, which stays the reference.
"""

from __future__ import annotations

import struct

import msgspec

from tidemq.protocol import RemotingCommand, SerializeType
from tidemq.protocol.command import JSON_HEADER_CODEC
from tidemq.protocol.frame import MAX_FRAME_SIZE, MAX_HEADER_SIZE

__all__ = ["SendCommand"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_ENCODER = msgspec.json.Encoder()
_PREFIX = struct.Struct(">iI")
"""Frame length, then serialize type (high byte) and header length (protocol/frame.py)."""
_SHORTCUT = JSON_HEADER_CODEC == "msgspec"
"""Only the msgspec codec's bytes are reproduced here."""
_HEADS: dict[int, tuple[str, int, bytes | None]] = {}
"""code -> (language, version, the header text up to the opaque; None: no shortcut)."""


def _head(code: int, language: str, version: int) -> bytes | None:
    """The header text before the opaque, made once per code (and kept while
    language and version are the usual ones: they never change in practice)."""
    cached = _HEADS.get(code)
    if cached is not None and cached[0] == language and cached[1] == version:
        return cached[2]
    head = None
    if (
        isinstance(code, int)  # RequestCode members too: both encoders write the number
        and isinstance(version, int)
        and isinstance(language, str)
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and language.isascii()
        and "\x7f" not in language
    ):
        head = b'{"code":%d,"language":%s,"version":%d,"opaque":' % (
            code,
            _ENCODER.encode(language),
            version,
        )
    if len(_HEADS) < 64:  # a handful of send codes
        _HEADS[code] = (language, version, head)
    return head


class SendCommand(RemotingCommand):
    """A RemotingCommand whose `encode_parts` takes the shortcut when it can.

    Its extFields must be str names and values, as `PreparedSend.request`
    makes them (the general encoder checks each one; this one does not,
    which is most of what it saves)."""

    __slots__ = ()

    def encode_parts(self) -> tuple[bytes, bytes]:
        opaque, flag, ext_fields = self.opaque, self.flag, self.ext_fields
        if not (
            _SHORTCUT
            and self.remark is None
            and self.serialize_type is SerializeType.JSON
            and type(opaque) is int
            and type(flag) is int
            and _INT32_MIN <= opaque <= _INT32_MAX
            and _INT32_MIN <= flag <= _INT32_MAX
            and type(ext_fields) is dict
        ):
            return RemotingCommand.encode_parts(self)
        code, language, version = self.code, self.language, self.version
        cached = _HEADS.get(code)
        if cached is not None and cached[0] is language and cached[1] == version:
            head = cached[2]
        else:
            head = _head(code, language, version)
        if head is None:
            return RemotingCommand.encode_parts(self)
        try:
            fields = _ENCODER.encode(ext_fields)
        except (TypeError, ValueError, OverflowError):  # e.g. a lone surrogate
            return RemotingCommand.encode_parts(self)
        if not fields.isascii() or b"\x7f" in fields:  # the reference escapes these
            return RemotingCommand.encode_parts(self)
        header = b'%s%d,"flag":%d,"extFields":%s}' % (head, opaque, flag, fields)
        body = self.body
        header_size = len(header)
        total = 4 + header_size + len(body)
        if header_size > MAX_HEADER_SIZE or total > MAX_FRAME_SIZE:
            return RemotingCommand.encode_parts(self)  # which raises the ProtocolError
        return _PREFIX.pack(total, header_size) + header, body  # serialize type JSON: 0
