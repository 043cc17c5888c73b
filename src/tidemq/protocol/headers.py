"""Typed custom headers: the ``extFields`` of a command as frozen dataclasses.

A header is a keyword-only frozen dataclass. Each field travels under its
wire name: the camelCase form of the Python name (``queue_id`` -> ``queueId``)
unless ``metadata=wire("...")`` names it, as SEND_MESSAGE_V2's one-letter keys
do. Field types are ``str``, ``bool``, ``Int32`` or ``Int64`` (Java's Integer
and Long, range checked), each optionally ``| None``. A field without default
is required; one with a default may be absent even where Java insists on the
key (CreateTopicRequestHeader.order), while encoding always writes it.

Decoding is lenient the way RocketMQ peers need: int fields take ``12``,
``"12"``, ``"-1"``, ``"+5"`` (ASCII digits only); bool fields take ``True``,
``1``, ``"true"``, ``"1"``, ``"TRUE"`` and the false forms; str fields take
anything and stringify it (``true`` -> ``"true"``). Unknown keys are ignored.
A missing required field or a value that cannot be coerced raises HeaderError,
whose message names the field so the broker can return it as the remark.
Unlike Java's ``Boolean.parseBoolean``, a bool field refuses ``"yes"`` instead
of reading it as false.

The field sets follow RocketMQ's ``*RequestHeader``/``*ResponseHeader`` classes
(4.9.7 fields plus optional 5.x additions). 5.x carries a broker name for
proxies as ``bname``; only the send and pull headers expose it here.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    NamedTuple,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from .codes import RequestCode
from .errors import ProtocolError

__all__ = [
    "AddWritePermOfBrokerResponseHeader",
    "BrokerWritePermRequestHeader",
    "CheckTransactionStateRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetRouteInfoRequestHeader",
    "HeaderError",
    "Int32",
    "Int64",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "RecallMessageRequestHeader",
    "RecallMessageResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "UnregisterBrokerRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
    "decode_header",
    "decode_send_message_header",
    "encode_header",
    "wire",
]


class HeaderError(ProtocolError):
    """A header field is missing or holds a value of the wrong kind."""

    def __init__(self, header: str, field_label: str, problem: str) -> None:
        super().__init__(f"{header}: field {field_label} {problem}")
        self.header = header
        self.field = field_label


@dataclass(frozen=True, slots=True)
class _IntRange:
    low: int
    high: int


_INT32_RANGE = _IntRange(-(2**31), 2**31 - 1)
_INT64_RANGE = _IntRange(-(2**63), 2**63 - 1)

Int32: TypeAlias = Annotated[int, _INT32_RANGE]
"""Java ``Integer``/``int`` header field."""
Int64: TypeAlias = Annotated[int, _INT64_RANGE]
"""Java ``Long``/``long`` header field (also what a plain ``int`` annotation means)."""

_WIRE_NAME = "tidemq.wire_name"


def wire(name: str) -> dict[str, str]:
    """Field metadata giving the key a field travels under, e.g. ``wire("clientID")``."""
    return {_WIRE_NAME: name}


HeaderT = TypeVar("HeaderT")


def decode_header(cls: type[HeaderT], ext_fields: Mapping[str, object]) -> HeaderT:
    """Build header ``cls`` from a command's extFields, coercing each value."""
    decode = _DECODERS.get(cls)
    if decode is None:
        decode = _DECODERS[cls] = _compile_decoder(cls, cls)
    header: HeaderT = decode(ext_fields)
    return header


def decode_header_reference(cls: type[HeaderT], ext_fields: Mapping[str, object]) -> HeaderT:
    """``decode_header`` as the field table reads it: the reference the compiled
    decoders are tested against (same values, same HeaderError)."""
    factory: Callable[..., HeaderT] = cls
    return factory(**_decode_values(cls, ext_fields))


def _decode_values(cls: type[Any], ext_fields: Mapping[str, object]) -> dict[str, object]:
    """The attribute values of header ``cls`` found in ``ext_fields``, coerced."""
    values: dict[str, object] = {}
    name = cls.__name__
    for spec in _field_specs(cls):
        raw = ext_fields.get(spec.wire_name)
        if raw is None:
            if spec.required:
                raise HeaderError(name, spec.label, "is missing")
            continue
        values[spec.attribute] = spec.parse(name, spec, raw)
    return values


def encode_header(header: object) -> dict[str, str]:
    """The extFields for ``header``: wire name -> text, None fields left out."""
    cls = type(header)
    encode = _ENCODERS.get(cls)
    if encode is None:
        encode = _ENCODERS[cls] = _compile_encoder(cls)
    return encode(header)


def encode_header_reference(header: object) -> dict[str, str]:
    """``encode_header`` as the field table reads it (the compiled encoders' reference)."""
    cls = type(header)
    ext_fields: dict[str, str] = {}
    for spec in _field_specs(cls):
        value = getattr(header, spec.attribute)
        if value is not None:
            ext_fields[spec.wire_name] = spec.render(cls.__name__, spec, value)
    return ext_fields


# --- field machinery -----------------------------------------------------------

_INT_TEXT = re.compile(r"[+-]?[0-9]{1,32}")
_TRUE_TEXT = frozenset({"true", "1"})
_FALSE_TEXT = frozenset({"false", "0"})


_Parse: TypeAlias = Callable[[str, "_FieldSpec", object], object]
_Render: TypeAlias = Callable[[str, "_FieldSpec", object], str]


class _FieldSpec(NamedTuple):
    attribute: str
    wire_name: str
    label: str
    required: bool
    low: int
    high: int
    parse: _Parse
    render: _Render


def _parse_int(header: str, spec: _FieldSpec, raw: object) -> int:
    if type(raw) is int:
        value = raw
    elif type(raw) is str and (
        (raw.isdigit() and raw.isascii() and len(raw) <= 32) or _INT_TEXT.fullmatch(raw)
    ):
        value = int(raw)
    else:
        raise HeaderError(header, spec.label, f"must be an integer, got {_preview(raw)}")
    if not spec.low <= value <= spec.high:
        raise HeaderError(header, spec.label, f"is out of range: {value}")
    return value


def _parse_bool(header: str, spec: _FieldSpec, raw: object) -> bool:
    if type(raw) is bool:
        return raw
    if type(raw) is int and raw in (0, 1):
        return raw == 1
    if type(raw) is str:
        text = raw.lower()
        if text in _TRUE_TEXT:
            return True
        if text in _FALSE_TEXT:
            return False
    raise HeaderError(header, spec.label, f"must be true or false, got {_preview(raw)}")


def _parse_str(header: str, spec: _FieldSpec, raw: object) -> str:
    if type(raw) is str:
        return raw
    if type(raw) is bool:
        return "true" if raw else "false"
    return str(raw)


def _render_int(header: str, spec: _FieldSpec, value: object) -> str:
    if type(value) is not int:
        raise HeaderError(header, spec.label, f"must be an int, got {_preview(value)}")
    if not spec.low <= value <= spec.high:
        raise HeaderError(header, spec.label, f"is out of range: {value}")
    return str(value)


def _render_bool(header: str, spec: _FieldSpec, value: object) -> str:
    if type(value) is not bool:
        raise HeaderError(header, spec.label, f"must be a bool, got {_preview(value)}")
    return "true" if value else "false"


def _render_str(header: str, spec: _FieldSpec, value: object) -> str:
    if type(value) is not str:
        raise HeaderError(header, spec.label, f"must be a str, got {_preview(value)}")
    return value


_CODECS: dict[type, tuple[_Parse, _Render]] = {
    int: (_parse_int, _render_int),
    bool: (_parse_bool, _render_bool),
    str: (_parse_str, _render_str),
}
_SPECS: dict[type[Any], tuple[_FieldSpec, ...]] = {}


def _field_specs(cls: type[Any]) -> tuple[_FieldSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = _build_field_specs(cls)
    return specs


def _build_field_specs(cls: type[Any]) -> tuple[_FieldSpec, ...]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a header dataclass")
    hints = get_type_hints(cls, include_extras=True)
    specs = []
    for item in dataclasses.fields(cls):
        base, int_range = _field_kind(cls, item.name, hints[item.name])
        parse, render = _CODECS[base]
        camel = _camel_case(item.name)
        wire_name = item.metadata.get(_WIRE_NAME, camel)
        label = repr(wire_name) if wire_name == camel else f"{wire_name!r} ({camel})"
        required = (
            item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
        )
        specs.append(
            _FieldSpec(
                item.name, wire_name, label, required, int_range.low, int_range.high, parse, render
            )
        )
    return tuple(specs)


def _field_kind(cls: type[Any], name: str, hint: object) -> tuple[type, _IntRange]:
    if get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{cls.__name__}.{name}: only 'X | None' unions are supported")
        hint = members[0]
    int_range = _INT64_RANGE
    if get_origin(hint) is Annotated:
        hint, *extras = get_args(hint)
        int_range = next((e for e in extras if isinstance(e, _IntRange)), _INT64_RANGE)
    if not isinstance(hint, type) or hint not in _CODECS:
        raise TypeError(f"{cls.__name__}.{name}: unsupported header field type {hint!r}")
    return hint, int_range


# --- compiled codecs -----------------------------------------------------------------
#
# decode_header and encode_header run one generated function per header class
# (as dataclasses generates __init__): the field loop unrolled, each wire name
# and default a constant, and the common value inlined (a str for a str field,
# a short run of ASCII digits for an int field, "true"/"false" for a bool);
# anything else goes to the same _parse_*/_render_* function the reference
# uses, so values and errors are the reference's (a property test holds them
# to decode_header_reference/encode_header_reference).

_PACKAGE = __name__.rpartition(".")[0] + "."
_Decoder: TypeAlias = Callable[[Mapping[str, object]], Any]
_Encoder: TypeAlias = Callable[[Any], dict[str, str]]
_DECODERS: dict[type[Any], _Decoder] = {}
_ENCODERS: dict[type[Any], _Encoder] = {}


def _fast_digits(spec: _FieldSpec) -> int:
    """How many ASCII digits always give a value within the field's range (0: none)."""
    if spec.low > 0:
        return 0
    digits = len(str(spec.high)) - 1
    return min(digits, 32) if 10**digits - 1 <= spec.high else 0


def _compile_decoder(source: type[Any], target: type[Any]) -> _Decoder:
    """A function building ``target`` from extFields laid out as header ``source``."""
    specs = _field_specs(source)
    defaults = {item.name: item.default for item in dataclasses.fields(target)}
    if any(
        spec.attribute not in defaults
        or (not spec.required and defaults[spec.attribute] is dataclasses.MISSING)
        for spec in specs
    ):  # a default_factory, or a field the target lacks: the reference builds it
        return lambda ext_fields: target(**_decode_values(source, ext_fields))
    namespace: dict[str, Any] = {
        "HeaderError": HeaderError,
        "NAME": source.__name__,
        "target": target,
        "str_type": str,
        "int": int,
        "len": len,
        "type": type,
    }
    lines = ["def decode(ext_fields):", "    get = ext_fields.get"]
    arguments = []
    for index, spec in enumerate(specs):
        value = f"v{index}"
        namespace[f"W{index}"] = spec.wire_name
        namespace[f"S{index}"] = spec
        namespace[f"P{index}"] = spec.parse
        lines.append(f"    raw = get(W{index})")
        lines.append("    if raw is None:")
        if spec.required:
            namespace[f"L{index}"] = spec.label
            lines.append(f"        raise HeaderError(NAME, L{index}, 'is missing')")
        else:
            namespace[f"D{index}"] = defaults[spec.attribute]
            lines.append(f"        {value} = D{index}")
        parse = f"P{index}(NAME, S{index}, raw)"
        if spec.parse is _parse_str:
            lines.append("    elif type(raw) is str_type:")
            lines.append(f"        {value} = raw")
        elif spec.parse is _parse_bool:
            lines.append("    elif type(raw) is str_type and raw == 'true':")
            lines.append(f"        {value} = True")
            lines.append("    elif type(raw) is str_type and raw == 'false':")
            lines.append(f"        {value} = False")
        elif spec.parse is _parse_int and _fast_digits(spec):
            lines.append(
                "    elif (type(raw) is str_type and raw.isdigit() and raw.isascii()"
                f" and len(raw) <= {_fast_digits(spec)}):"
            )
            lines.append(f"        {value} = int(raw)")
        lines.append("    else:")
        lines.append(f"        {value} = {parse}")
        arguments.append(f"{spec.attribute}={value}")
    if _plain_slots_dataclass(target, [spec.attribute for spec in specs]):
        # What the generated frozen __init__ does, minus the keyword call and
        # object.__setattr__ lookups: each value stored through its slot.
        namespace["new"] = object.__new__
        lines.append("    header = new(target)")
        for index, spec in enumerate(specs):
            namespace[f"SET{index}"] = getattr(target, spec.attribute).__set__
            lines.append(f"    SET{index}(header, v{index})")
        lines.append("    return header")
    else:
        lines.append(f"    return target({', '.join(arguments)})")
    exec("\n".join(lines), namespace)  # source generated from the dataclass fields
    decode: _Decoder = namespace["decode"]
    return decode


def _plain_slots_dataclass(cls: type[Any], attributes: list[str]) -> bool:
    """Whether a ``cls`` can be built by storing ``attributes`` in its slots, as its
    dataclass __init__ would: a header class of tidemq.protocol, every field
    set by __init__ and stored in a slot, no __post_init__."""
    fields = dataclasses.fields(cls)
    return (
        cls.__module__.startswith(_PACKAGE)
        and not hasattr(cls, "__post_init__")
        and sorted(item.name for item in fields) == sorted(attributes)
        and all(item.init for item in fields)
        and all(
            isinstance(cls.__dict__.get(name), types.MemberDescriptorType) for name in attributes
        )
    )


def _compile_encoder(cls: type[Any]) -> _Encoder:
    """A function giving the extFields of a ``cls`` header."""
    specs = _field_specs(cls)
    namespace: dict[str, Any] = {"NAME": cls.__name__, "str_type": str, "int_type": int}
    lines = ["def encode(header):", "    ext_fields = {}"]
    for index, spec in enumerate(specs):
        namespace[f"W{index}"] = spec.wire_name
        namespace[f"S{index}"] = spec
        namespace[f"R{index}"] = spec.render
        lines.append(f"    value = header.{spec.attribute}")
        lines.append("    if value is not None:")
        render = f"R{index}(NAME, S{index}, value)"
        if spec.render is _render_str:
            fast = f"value if type(value) is str_type else {render}"
        elif spec.render is _render_bool:
            fast = f"'true' if value is True else 'false' if value is False else {render}"
        else:
            fast = (
                f"str_type(value) if type(value) is int_type and {spec.low} <= value <= "
                f"{spec.high} else {render}"
            )
        lines.append(f"        ext_fields[W{index}] = {fast}")
    lines.append("    return ext_fields")
    exec("\n".join(lines), namespace)  # source generated from the dataclass fields
    encode: _Encoder = namespace["encode"]
    return encode


def _camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _preview(value: object, limit: int = 64) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# --- sending -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (10) header, and the form every send is handled in."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: Int64
    flag: Int32
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: Int32 | None = None
    broker_name: str | None = field(default=None, metadata=wire("bname"))

    def to_v2(self) -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2(**_field_values(self))


@dataclass(frozen=True, kw_only=True, slots=True)
class SendMessageRequestHeaderV2:
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): the V1 fields under keys a..n."""

    producer_group: str = field(metadata=wire("a"))
    topic: str = field(metadata=wire("b"))
    default_topic: str = field(metadata=wire("c"))
    default_topic_queue_nums: Int32 = field(metadata=wire("d"))
    queue_id: Int32 = field(metadata=wire("e"))
    sys_flag: Int32 = field(metadata=wire("f"))
    born_timestamp: Int64 = field(metadata=wire("g"))
    flag: Int32 = field(metadata=wire("h"))
    properties: str | None = field(default=None, metadata=wire("i"))
    reconsume_times: Int32 | None = field(default=None, metadata=wire("j"))
    unit_mode: bool = field(default=False, metadata=wire("k"))
    max_reconsume_times: Int32 | None = field(default=None, metadata=wire("l"))
    batch: bool = field(default=False, metadata=wire("m"))
    broker_name: str | None = field(default=None, metadata=wire("n"))

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(**_field_values(self))

    @classmethod
    def from_v1(cls, header: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(**_field_values(header))


_SEND_V2_CODES = frozenset(
    {
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.TIDEMQ_SEND_HALF_BATCH,
    }
)


def decode_send_message_header(
    code: int, ext_fields: Mapping[str, object]
) -> SendMessageRequestHeader:
    """The send header of a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request."""
    if code in _SEND_V2_CODES:
        # The V2 fields carry V1's attribute names: build V1 directly (the
        # hottest header of the broker; no intermediate V2 object).
        global _send_v2_as_v1
        decode = _send_v2_as_v1
        if decode is None:
            decode = _send_v2_as_v1 = _compile_decoder(
                SendMessageRequestHeaderV2, SendMessageRequestHeader
            )
        header: SendMessageRequestHeader = decode(ext_fields)
        return header
    return decode_header(SendMessageRequestHeader, ext_fields)


_send_v2_as_v1: _Decoder | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SendMessageResponseHeader:
    msg_id: str
    queue_id: Int32
    queue_offset: Int64
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None


def _field_values(header: Any) -> dict[str, Any]:
    return {item.name: getattr(header, item.name) for item in dataclasses.fields(header)}


# --- pulling and offsets -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: Int32
    queue_offset: Int64
    max_msg_nums: Int32
    sys_flag: Int32
    commit_offset: Int64
    suspend_timeout_millis: Int64
    subscription: str | None = None
    sub_version: Int64
    expression_type: str | None = None
    max_msg_bytes: Int32 | None = None
    request_source: Int32 | None = None
    # RocketMQ's own spelling of the key.
    proxy_forward_client_id: str | None = field(default=None, metadata=wire("proxyFrowardClientId"))
    broker_name: str | None = field(default=None, metadata=wire("bname"))


@dataclass(frozen=True, kw_only=True, slots=True)
class PullMessageResponseHeader:
    suggest_which_broker_id: Int64
    next_begin_offset: Int64
    min_offset: Int64
    max_offset: Int64
    offset_delta: Int64 | None = None
    topic_sys_flag: Int32 | None = None
    group_sys_flag: Int32 | None = None
    forbidden_type: Int32 | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: Int32
    set_zero_if_not_found: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryConsumerOffsetResponseHeader:
    offset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class UpdateConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: Int32
    commit_offset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class GetMaxOffsetRequestHeader:
    topic: str
    queue_id: Int32
    committed: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class GetMaxOffsetResponseHeader:
    offset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class GetMinOffsetRequestHeader:
    topic: str
    queue_id: Int32


@dataclass(frozen=True, kw_only=True, slots=True)
class GetMinOffsetResponseHeader:
    offset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader:
    topic: str
    queue_id: Int32


@dataclass(frozen=True, kw_only=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOffsetRequestHeader:
    topic: str
    queue_id: Int32
    timestamp: Int64
    # Java's BoundaryType: "LOWER" (default when absent) or "UPPER", any case.
    boundary_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchOffsetResponseHeader:
    offset: Int64


# --- consumers and clients -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ConsumerSendMsgBackRequestHeader:
    offset: Int64
    group: str
    delay_level: Int32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class UnregisterClientRequestHeader:
    client_id: str = field(metadata=wire("clientID"))
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GetConsumerListByGroupRequestHeader:
    consumer_group: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    consumer_group: str


# --- transactions ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class EndTransactionRequestHeader:
    producer_group: str
    tran_state_table_offset: Int64
    commit_log_offset: Int64
    # MessageSysFlag transaction type: 0 not a transaction, 8 commit, 12 rollback.
    commit_or_rollback: Int32
    from_transaction_check: bool = False
    msg_id: str
    transaction_id: str | None = None
    topic: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckTransactionStateRequestHeader:
    tran_state_table_offset: Int64
    commit_log_offset: Int64
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    topic: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallMessageRequestHeader:
    """RECALL_MESSAGE (370, RocketMQ 5.3): cancel a timer message by its handle."""

    producer_group: str | None = None
    topic: str
    recall_handle: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallMessageResponseHeader:
    msg_id: str


# --- queries -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryMessageRequestHeader:
    topic: str
    key: str
    max_num: Int32
    begin_timestamp: Int64
    end_timestamp: Int64


QUERY_BELOW_OFFSET = "tidemqBelowOffset"
"""A tidemq extension field of QUERY_MESSAGE (key queries): only records before
this commit-log offset, the cursor of a paged query. A tidemq broker echoes it
in the response when it applied it; a Java broker ignores it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryMessageResponseHeader:
    index_last_update_timestamp: Int64
    index_last_update_phyoffset: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class ViewMessageRequestHeader:
    offset: Int64
    topic: str | None = None


# --- topics, routes and the name server -------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CreateTopicRequestHeader:
    topic: str
    default_topic: str
    read_queue_nums: Int32
    write_queue_nums: Int32
    perm: Int32
    topic_filter_type: str
    topic_sys_flag: Int32 | None = None
    order: bool = False
    attributes: str | None = None
    force: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteTopicRequestHeader:
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@dataclass(frozen=True, kw_only=True, slots=True)
class BrokerWritePermRequestHeader:
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327): Java's
    Wipe/AddWritePermOfBrokerRequestHeader, both a bare brokerName."""

    broker_name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class WipeWritePermOfBrokerResponseHeader:
    wipe_topic_count: Int32


@dataclass(frozen=True, kw_only=True, slots=True)
class AddWritePermOfBrokerResponseHeader:
    add_topic_count: Int32


@dataclass(frozen=True, kw_only=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader:
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class GetRouteInfoRequestHeader:
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Int64
    heartbeat_timeout_millis: Int64 | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    # CRC32 of the body & 0x7FFFFFFF; 0 disables the check.
    body_crc32: Int32 = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class RegisterBrokerResponseHeader:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class UnregisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Int64


@dataclass(frozen=True, kw_only=True, slots=True)
class GetKVConfigRequestHeader:
    namespace: str
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GetKVConfigResponseHeader:
    value: str | None = None
