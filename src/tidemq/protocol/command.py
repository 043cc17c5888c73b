"""RemotingCommand: the request/response object inside every frame.

A frame's header is encoded one of two ways, chosen by the frame's serialize
type; a response is always written the way its request was.

JSON (serialize type 0, what ali-ons and most clients speak): one UTF-8 JSON
object with the keys ``code`` (int), ``language`` (name, e.g. ``"JAVA"``),
``version`` (int), ``opaque`` (int, the request id a response echoes), ``flag``
(int: bit 0 = response, bit 1 = oneway), ``remark`` (string, left out when
None) and ``extFields`` (object). Java also sends ``serializeTypeCurrentRPC``,
which is accepted and ignored on input and never written. extFields values may
arrive as JSON strings, numbers or booleans and are turned into strings the
way Java's fastjson would (booleans become ``"true"``/``"false"``, null
entries are dropped); nested values are rejected. Headers nesting deeper than
MAX_JSON_DEPTH are refused before the JSON parser sees them.

The JSON header codec has two implementations that give the same results:
the reference on the standard library's ``json`` (``_decode_json_header_stdlib``,
``_encode_json_header_stdlib``) and a compiled one on msgspec, several times
faster, which decodes into a strictly typed struct. The msgspec decoder
answers only what it can answer exactly as the reference would; a header it
cannot take strictly (a key it does not know, extFields holding numbers,
booleans or nulls, a null or out-of-range field, bad UTF-8, any JSON error)
goes to the reference decoder, which accepts it or raises ProtocolError as
before. The msgspec encoder writes only headers of plain strings whose JSON
comes out pure ASCII without DEL (the reference writes the rest as
``\\u`` escapes); others go to the reference encoder. The bytes are identical
either way (tests/unit/protocol/test_header_codec_fast.py holds both paths
to it). ``TIDEMQ_HEADER_CODEC=stdlib`` (read at import) runs the reference
alone.

ROCKETMQ binary (serialize type 1), all integers big-endian::

    offset  size  field
    0       2     code (int16)
    2       1     language (LanguageCode ordinal)
    3       2     version (int16)
    5       4     opaque (int32)
    9       4     flag (int32)
    13      4     remarkLength (int32), then remark (UTF-8; length 0 = no remark)
    ..      4     extLength (int32), then extLength bytes of entries, each:
                  keyLength (int16), key (UTF-8), valueLength (int32), value (UTF-8)

The ext entries must fill extLength exactly and end the header. A language
byte this code does not know decodes as ``"OTHER"`` (Java would give null),
and a language name without a byte encodes as OTHER (7). Java decodes empty
ext values as null; here they stay empty strings. An empty remark encodes as
length 0 and so decodes as None.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Annotated, Any

import msgspec

from .codes import LanguageCode, SerializeType
from .errors import ProtocolError
from .frame import MAX_FRAME_SIZE, BytesLike, Frame, FrameDecoder, encode_frame, frame_prefix

RESPONSE_FLAG = 0b01
"""Flag bit 0: the command is a response (Java ``RPC_TYPE``)."""
ONEWAY_FLAG = 0b10
"""Flag bit 1: the request expects no response (Java ``RPC_ONEWAY``)."""

DEFAULT_LANGUAGE = "JAVA"
DEFAULT_VERSION = 407
"""Java ``MQVersion.Version.V4_9_7.ordinal()``: the protocol level tidemq speaks."""

MAX_JSON_DEPTH = 32

_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

_BINARY_FIXED = struct.Struct(">hBhii")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_LANGUAGE_NAMES = tuple(member.name for member in LanguageCode)
_LANGUAGE_CODES = {member.name: int(member) for member in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One request or response; ``ext_fields`` carries the typed header (see headers.py)."""

    code: int
    language: str = DEFAULT_LANGUAGE
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON
    received_at: float = field(default=0.0, compare=False, repr=False)
    """When a server's connection decoded this request (its event loop's
    clock), for the RPC latency it records; 0.0 when nobody measures. Not
    part of the frame."""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        opaque: int = 0,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request; the caller (a connection) owns opaque allocation."""
        return cls(
            code=code,
            opaque=opaque,
            flag=ONEWAY_FLAG if oneway else 0,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
            serialize_type=serialize_type,
        )

    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to ``request``: same opaque, response bit set, same header encoding."""
        return cls(
            code=code,
            opaque=request.opaque,
            flag=RESPONSE_FLAG,
            remark=remark,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
            serialize_type=request.serialize_type,
        )

    def encode(self) -> bytes:
        """The whole frame, ready to write to the stream."""
        if self.serialize_type == SerializeType.ROCKETMQ:
            header = _encode_binary_header(self)
        else:
            header = _encode_json_header(self)
        return encode_frame(self.serialize_type, header, self.body)

    def encode_parts(self) -> tuple[bytes, bytes]:
        """The frame as (length prefix + header, body): for a writer that can
        send the two with one gathering write, so a large body (a batch of
        messages, a pull answer) is not copied into a new frame first."""
        if self.serialize_type == SerializeType.ROCKETMQ:
            header = _encode_binary_header(self)
        else:
            header = _encode_json_header(self)
        body = self.body
        prefix = frame_prefix(self.serialize_type, len(header), len(body))
        return prefix + header, body


def decode_command(frame: Frame) -> RemotingCommand:
    """Decode a frame's header; raise ProtocolError for anything malformed."""
    if frame.serialize_type == SerializeType.JSON:
        command = _decode_json_header(frame.header)
        command.serialize_type = SerializeType.JSON
    elif frame.serialize_type == SerializeType.ROCKETMQ:
        command = _decode_binary_header(frame.header)
        command.serialize_type = SerializeType.ROCKETMQ
    else:
        raise ProtocolError(f"unknown serialize type {frame.serialize_type}")
    command.body = frame.body
    return command


class CommandDecoder:
    """A FrameDecoder that also decodes each frame's header; fails for good like it."""

    __slots__ = ("_failure", "_frames")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._frames = FrameDecoder(max_frame_size)
        self._failure: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a command."""
        return self._frames.buffered

    @property
    def pending_frame_size(self) -> int:
        """See FrameDecoder.pending_frame_size."""
        return self._frames.pending_frame_size

    def feed(self, data: BytesLike) -> list[RemotingCommand]:
        """Add received bytes; return every command they complete, in stream order."""
        if self._failure is not None:
            raise ProtocolError(f"command decoder already failed: {self._failure}")
        try:
            return [decode_command(frame) for frame in self._frames.feed(data)]
        except ProtocolError as exc:
            self._failure = str(exc)
            raise


# --- JSON headers -------------------------------------------------------------

_JSON_STRING = re.compile(rb'"(?:[^"\\]+|\\.?)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_DEPTH_STEP = tuple({0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}.get(byte, 0) for byte in range(256))
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _encode_json_header_stdlib(command: RemotingCommand) -> bytes:
    code, version, opaque, flag = command.code, command.version, command.opaque, command.flag
    if not (
        _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):  # one comparison chain on the hot path; the checks below name the culprit
        _checked_int("code", code, _INT32_MIN, _INT32_MAX)
        _checked_int("version", version, _INT32_MIN, _INT32_MAX)
        _checked_int("opaque", opaque, _INT32_MIN, _INT32_MAX)
        _checked_int("flag", flag, _INT32_MIN, _INT32_MAX)
    header: dict[str, Any] = {
        "code": code,
        "language": command.language,
        "version": version,
        "opaque": opaque,
        "flag": flag,
    }
    if command.remark is not None:
        header["remark"] = command.remark
    header["extFields"] = command.ext_fields
    # ASCII output escapes anything odd (even lone surrogates), so it cannot fail.
    return _JSON_ENCODER.encode(header).encode("ascii")


def _decode_json_header_stdlib(header: bytes) -> RemotingCommand:
    _reject_deep_nesting(header)
    try:
        text = header.decode("utf-8")
        document = _JSON_DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"header is not valid JSON: {_short(str(exc))}") from None
    if type(document) is not dict:
        raise ProtocolError(f"JSON header must be an object, got {type(document).__name__}")
    if document.get("code") is None:
        raise ProtocolError("JSON header has no 'code'")
    command = RemotingCommand(
        code=_json_int(document, "code", 0),
        language=_json_str(document, "language", DEFAULT_LANGUAGE),
        version=_json_int(document, "version", 0),
        opaque=_json_int(document, "opaque", 0),
        flag=_json_int(document, "flag", 0),
        remark=_json_optional_str(document, "remark"),
        ext_fields=_json_ext_fields(document.get("extFields")),
    )
    if _SURROGATE_ESCAPE.search(header):
        _reject_lone_surrogates(command)
    return command


def _reject_deep_nesting(header: bytes) -> None:
    """Refuse headers nesting deeper than MAX_JSON_DEPTH, in linear time, before parsing."""
    if header.count(b"[") + header.count(b"{") <= MAX_JSON_DEPTH:
        return
    # Drop string literals (an unterminated one runs to the end), keep only the
    # brackets and track the running depth; json.loads judges the rest.
    brackets = _JSON_STRING.sub(b"", header).translate(None, _NOT_BRACKETS)
    depth = max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)
    if depth > MAX_JSON_DEPTH:
        raise ProtocolError(f"JSON header nests deeper than {MAX_JSON_DEPTH} levels")


def _reject_json_constant(name: str) -> None:
    raise ProtocolError(f"JSON constant {name} is not allowed")


# One encoder and one decoder for every header: `json.dumps`/`json.loads` with
# options build a new one per call, a measurable share of a small request.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"))
_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_json_constant)


def _json_int(document: dict[str, Any], key: str, default: int) -> int:
    value = document.get(key)
    if value is None:
        return default
    if type(value) is not int:
        raise ProtocolError(f"JSON header '{key}' must be an integer, got {_short(repr(value))}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ProtocolError(f"JSON header '{key}' {value} does not fit in 32 bits")
    return value


def _json_str(document: dict[str, Any], key: str, default: str) -> str:
    value = _json_optional_str(document, key)
    return default if value is None else value


def _json_optional_str(document: dict[str, Any], key: str) -> str | None:
    value = document.get(key)
    if value is not None and type(value) is not str:
        raise ProtocolError(f"JSON header '{key}' must be a string, got {_short(repr(value))}")
    return value


_ONLY_STR = frozenset({str})


def _json_ext_fields(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if type(raw) is not dict:
        raise ProtocolError(f"JSON header 'extFields' must be an object, got {type(raw).__name__}")
    if _ONLY_STR.issuperset(map(type, raw.values())):
        return raw  # the common case: all strings (a fresh dict from the parser)
    ext_fields: dict[str, str] = {}
    for key, value in raw.items():
        kind = type(value)
        if kind is str:
            ext_fields[key] = value
        elif kind is bool:
            ext_fields[key] = "true" if value else "false"
        elif kind is int or kind is float:
            ext_fields[key] = str(value)
        elif value is not None:
            raise ProtocolError(f"extFields '{_short(key)}' holds a {kind.__name__}")
    return ext_fields


def _reject_lone_surrogates(command: RemotingCommand) -> None:
    # JSON may spell an unpaired surrogate (\ud800); such text cannot be UTF-8
    # encoded again, so it is refused here instead of failing deep inside the broker.
    texts = [command.language, command.remark or ""]
    texts.extend(command.ext_fields)
    texts.extend(command.ext_fields.values())
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError("JSON header contains an unpaired surrogate") from None


# --- the compiled (msgspec) JSON codec ---------------------------------------------

_Int32 = Annotated[int, msgspec.Meta(ge=_INT32_MIN, le=_INT32_MAX)]


class _JsonHeader(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A JSON header as the fast path takes it: only known keys, strictly typed.

    With no unknown keys there is nothing to skip: every byte is JSON syntax
    or inside a string msgspec decodes (and checks as UTF-8), the document
    nests two levels deep and every integer fits 32 bits. Anything else
    fails here and goes to the reference decoder.
    """

    code: _Int32 | None = None
    language: str | None = None
    version: _Int32 | None = None
    opaque: _Int32 | None = None
    flag: _Int32 | None = None
    remark: str | None = None
    extFields: dict[str, str] | None = None  # the wire names
    serializeTypeCurrentRPC: str | None = None  # Java sends it; ignored


_HEADER_DECODER = msgspec.json.Decoder(_JsonHeader)
_HEADER_ENCODER = msgspec.json.Encoder()


def _decode_json_header_msgspec(header: bytes) -> RemotingCommand:
    try:
        parsed = _HEADER_DECODER.decode(header)
    except (msgspec.DecodeError, ValueError, RecursionError):
        # Unknown keys, lenient extFields, nulls, wrong types or ranges,
        # malformed JSON or UTF-8, lone surrogates: the reference decoder
        # accepts, converts or refuses them.
        return _decode_json_header_stdlib(header)
    code = parsed.code
    if code is None:
        return _decode_json_header_stdlib(header)  # raises: no code
    language = parsed.language
    version = parsed.version
    opaque = parsed.opaque
    flag = parsed.flag
    ext_fields = parsed.extFields
    return RemotingCommand(
        code,
        DEFAULT_LANGUAGE if language is None else language,
        0 if version is None else version,
        0 if opaque is None else opaque,
        0 if flag is None else flag,
        parsed.remark,
        {} if ext_fields is None else ext_fields,
    )


def _encode_json_header_msgspec(command: RemotingCommand) -> bytes:
    code, version, opaque, flag = command.code, command.version, command.opaque, command.flag
    ext_fields = command.ext_fields
    language = command.language
    remark = command.remark
    if not (
        _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and type(language) is str
        and (remark is None or type(remark) is str)
        and type(ext_fields) is dict
        and _ONLY_STR.issuperset(map(type, ext_fields.values()))
        and _ONLY_STR.issuperset(map(type, ext_fields))
    ):  # out of range (the reference names the culprit) or not plain strings
        return _encode_json_header_stdlib(command)
    if remark is None:
        header: dict[str, Any] = {
            "code": code,
            "language": language,
            "version": version,
            "opaque": opaque,
            "flag": flag,
            "extFields": ext_fields,
        }
    else:
        header = {
            "code": code,
            "language": language,
            "version": version,
            "opaque": opaque,
            "flag": flag,
            "remark": remark,
            "extFields": ext_fields,
        }
    try:
        data = _HEADER_ENCODER.encode(header)
    except (TypeError, ValueError, OverflowError):  # e.g. a lone surrogate
        return _encode_json_header_stdlib(command)
    if data.isascii() and b"\x7f" not in data:
        return data  # what the reference writes, byte for byte
    # The reference escapes non-ASCII text and DEL as \uXXXX; msgspec writes UTF-8.
    return _encode_json_header_stdlib(command)


HEADER_CODEC_ENV = "TIDEMQ_HEADER_CODEC"
JSON_HEADER_CODEC = "stdlib" if os.environ.get(HEADER_CODEC_ENV) == "stdlib" else "msgspec"
"""Which JSON header codec runs: "msgspec", or "stdlib" when TIDEMQ_HEADER_CODEC=stdlib."""

_decode_json_header: Callable[[bytes], RemotingCommand]
_encode_json_header: Callable[[RemotingCommand], bytes]
if JSON_HEADER_CODEC == "stdlib":
    _decode_json_header = _decode_json_header_stdlib
    _encode_json_header = _encode_json_header_stdlib
else:
    _decode_json_header = _decode_json_header_msgspec
    _encode_json_header = _encode_json_header_msgspec


# --- ROCKETMQ binary headers --------------------------------------------------


def _encode_binary_header(command: RemotingCommand) -> bytes:
    language = _LANGUAGE_CODES.get(command.language, LanguageCode.OTHER)
    parts = [
        _BINARY_FIXED.pack(
            _checked_int("code", command.code, _INT16_MIN, _INT16_MAX),
            language,
            _checked_int("version", command.version, _INT16_MIN, _INT16_MAX),
            _checked_int("opaque", command.opaque, _INT32_MIN, _INT32_MAX),
            _checked_int("flag", command.flag, _INT32_MIN, _INT32_MAX),
        )
    ]
    remark = _utf8("remark", command.remark or "")
    parts += (_INT32.pack(len(remark)), remark)
    ext_parts: list[bytes] = []
    for key, value in command.ext_fields.items():
        key_bytes = _utf8("extFields key", key)
        if len(key_bytes) > _INT16_MAX:
            raise ProtocolError(f"extFields key of {len(key_bytes)} bytes exceeds {_INT16_MAX}")
        value_bytes = _utf8("extFields value", value)
        ext_parts += (_INT16.pack(len(key_bytes)), key_bytes, _INT32.pack(len(value_bytes)))
        ext_parts.append(value_bytes)
    ext = b"".join(ext_parts)
    parts += (_INT32.pack(len(ext)), ext)
    return b"".join(parts)


def _decode_binary_header(header: bytes) -> RemotingCommand:
    end = len(header)
    if end < _BINARY_FIXED.size + 8:
        raise ProtocolError(f"binary header of {end} bytes is too short")
    code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header, 0)
    position = _BINARY_FIXED.size
    remark_length = _read_length(header, position, _INT32, end - position - 8, "remark")
    position += 4
    remark = _utf8_text(header, position, remark_length, "remark") if remark_length else None
    position += remark_length
    ext_length = _read_length(header, position, _INT32, end - position - 4, "extFields")
    position += 4
    if ext_length != end - position:
        raise ProtocolError(
            f"extFields length {ext_length} does not match the {end - position} bytes left"
        )
    return RemotingCommand(
        code=code,
        language=_LANGUAGE_NAMES[language] if language < len(_LANGUAGE_NAMES) else "OTHER",
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=_decode_binary_ext(header, position, end),
    )


def _decode_binary_ext(header: bytes, position: int, end: int) -> dict[str, str]:
    ext_fields: dict[str, str] = {}
    while position < end:
        if end - position < 6:
            raise ProtocolError("truncated extFields entry")
        key_length = _read_length(header, position, _INT16, end - position - 6, "extFields key")
        position += 2
        key = _utf8_text(header, position, key_length, "extFields key")
        position += key_length
        value_length = _read_length(header, position, _INT32, end - position - 4, "extFields value")
        position += 4
        ext_fields[key] = _utf8_text(header, position, value_length, "extFields value")
        position += value_length
    return ext_fields


def _read_length(header: bytes, position: int, fmt: struct.Struct, room: int, what: str) -> int:
    (length,) = fmt.unpack_from(header, position)
    if length < 0 or length > room:
        raise ProtocolError(f"{what} length {length} does not fit the header")
    return int(length)


def _utf8_text(header: bytes, position: int, length: int, what: str) -> str:
    try:
        return header[position : position + length].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what} is not valid UTF-8") from None


# --- shared helpers -----------------------------------------------------------


def _utf8(what: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError(f"{what} cannot be encoded as UTF-8") from None


def _checked_int(what: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ProtocolError(f"{what} {value} does not fit in [{low}, {high}]")
    return value


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
