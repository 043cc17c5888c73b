"""The stored-message record: one commitlog entry, and the unit a PULL_MESSAGE
response body is a run of. Also the SEND_BATCH_MESSAGE body format.

Checked against apache/rocketmq 5.x: `store/.../MessageExtEncoder.java`
(`calMsgLength`, `encode`), `common/.../message/MessageDecoder.java`
(`decode`, `encodeMessage(s)`, `decodeMessage(s)`), `MessageVersion.java`,
`store/.../CommitLog.java` (BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH) and
`common/.../UtilAll.java` (`crc32`). All integers are big-endian, signed.

Record layout, IPv4 born and store hosts, v1 magic (n body, t topic, p
properties bytes)::

    offset   size  field
    0        4     TOTALSIZE            whole record, this field included
    4        4     MAGICCODE            v1 0xDAA320A7 (-626843481)
    8        4     BODYCRC              zlib CRC-32 of the stored body & 0x7FFFFFFF
    12       4     QUEUEID
    16       4     FLAG                 user flag
    20       8     QUEUEOFFSET          index in the consume queue
    28       8     PHYSICALOFFSET       commitlog offset of this record
    36       4     SYSFLAG              see tidemq.common.sysflag
    40       8     BORNTIMESTAMP        ms
    48       4+4   BORNHOST             IPv4 + port (int32)
    56       8     STORETIMESTAMP       ms
    64       4+4   STOREHOST            IPv4 + port (int32)
    72       4     RECONSUMETIMES
    76       8     PREPARED TRANSACTION OFFSET
    84       4     BODYLENGTH
    88       n     BODY
    88+n     1     TOPICLENGTH          (signed byte, so t <= 127)
    89+n     t     TOPIC                UTF-8
    89+n+t   2     PROPERTIESLENGTH     (signed int16, so p <= 32767)
    91+n+t   p     PROPERTIES           UTF-8, `k\\x01v\\x02...`
    total = 91 + n + t + p

IPv6: SYSFLAG bit 4 (BORNHOST_V6) makes BORNHOST 16+4 bytes and bit 5
(STOREHOST_V6) makes STOREHOST 16+4 bytes; every later field moves 12 bytes
per IPv6 host (STORETIMESTAMP is at 56 or 68).

v2 magic 0xDAA320AB (-626843477): TOPICLENGTH is an int16, so the topic tail
moves by one byte and total = 92 + n + t + p. RocketMQ 5 writes v2 only for
topics longer than 127 (`autoMessageVersionOnTopicLen`); clients before 5.x
(ali-ons too) cannot read it.

End of a commitlog file: a blank record of TOTALSIZE = bytes left in the
file, MAGICCODE = BLANK_MAGIC 0xCBD43194 (-875286124); a file always keeps
END_FILE_MIN_BLANK_LENGTH = 8 bytes for it.

Batch body (SEND_BATCH_MESSAGE request), one entry per message::

    TOTALSIZE int32 (= 22 + n + p) | MAGICCODE int32 (0) | BODYCRC int32 (0) |
    FLAG int32 | BODYLENGTH int32 | BODY n | PROPERTIESLENGTH int16 | PROPERTIES p

Java writes 0 for MAGICCODE and BODYCRC and never reads them back; neither do
we. Topic and the other fields come from the request header.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tidemq.common import sysflag
from tidemq.common.errors import ProtocolError
from tidemq.common.message import Message, MessageExt
from tidemq.common.properties import decode_properties, encode_properties_bytes

MESSAGE_MAGIC_V1 = -626843481
"""0xDAA320A7 as a signed int32."""
MESSAGE_MAGIC_V2 = -626843477
"""0xDAA320AB as a signed int32: 2-byte topic length."""
BLANK_MAGIC = -875286124
"""0xCBD43194 as a signed int32: the end-of-file filler record."""
END_FILE_MIN_BLANK_LENGTH = 8

MAX_V1_TOPIC_LENGTH = 127
MAX_TOPIC_LENGTH = 32767
MAX_PROPERTIES_LENGTH = 32767
MAX_DECOMPRESSED_BODY = 256 * 1024 * 1024
"""`decompress=True` refuses to inflate a body beyond this (zip bombs)."""

QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYSFLAG_POSITION = 36
BORN_HOST_POSITION = 48

_V6_BITS = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6
_CRC_MASK = 0x7FFFFFFF
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


def _fixed_format(born_ip: int, store_ip: int) -> str:
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG
    # BORNTIMESTAMP BORNHOST port STORETIMESTAMP STOREHOST port RECONSUMETIMES
    # PREPARED_OFFSET BODYLENGTH
    return f">iiiiiqqiq{born_ip}siq{store_ip}siiqi"


_FIXED_BY_HOSTS = {
    (4, 4): struct.Struct(_fixed_format(4, 4)),
    (4, 16): struct.Struct(_fixed_format(4, 16)),
    (16, 4): struct.Struct(_fixed_format(16, 4)),
    (16, 16): struct.Struct(_fixed_format(16, 16)),
}
"""The fixed part, TOTALSIZE through BODYLENGTH, by (born, store) IP length."""
_FIXED_BY_V6_BITS = {
    0: _FIXED_BY_HOSTS[4, 4],
    sysflag.BORNHOST_V6: _FIXED_BY_HOSTS[16, 4],
    sysflag.STOREHOST_V6: _FIXED_BY_HOSTS[4, 16],
    _V6_BITS: _FIXED_BY_HOSTS[16, 16],
}
_V6_BITS_BY_HOSTS = {
    (4, 4): 0,
    (4, 16): sysflag.STOREHOST_V6,
    (16, 4): sysflag.BORNHOST_V6,
    (16, 16): _V6_BITS,
}
_FIXED_V4 = _FIXED_BY_HOSTS[4, 4]
_NOT_V6_BITS = ~_V6_BITS
_V1_TOPIC_HEADS = tuple(bytes((length,)) for length in range(MAX_V1_TOPIC_LENGTH + 1))
FIXED_PART_LENGTH = _FIXED_V4.size
"""88: TOTALSIZE through BODYLENGTH with IPv4 hosts."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TWO_I32 = struct.Struct(">ii")
_TWO_I64 = struct.Struct(">qq")
_HEAD = struct.Struct(">iiiiiqqi")
"""TOTALSIZE through SYSFLAG."""
_BATCH_HEAD = struct.Struct(">iiiii")
_BATCH_FIXED = _BATCH_HEAD.size + 2

Buffer = bytes | bytearray | memoryview


class RecordHeader(NamedTuple):
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    store_timestamp: int


def record_size(
    body_len: int,
    topic_len: int,
    props_len: int,
    born_v6: bool = False,
    store_v6: bool = False,
    v2: bool = False,
) -> int:
    """TOTALSIZE of a record with these lengths (Java's `calMsgLength`)."""
    return (
        FIXED_PART_LENGTH
        + (12 if born_v6 else 0)
        + (12 if store_v6 else 0)
        + body_len
        + (2 if v2 else 1)
        + topic_len
        + 2
        + props_len
    )


def body_crc32(body: Buffer) -> int:
    """RocketMQ's body CRC: zlib CRC-32 with the sign bit cleared (`UtilAll.crc32`)."""
    return zlib.crc32(body) & _CRC_MASK


# -- encoding -----------------------------------------------------------------


def encode_record(
    topic: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    properties: bytes,
    body_crc: int | None = None,
) -> bytes:
    """One stored record. The host lengths (4 or 16) set or clear the V6
    SYSFLAG bits; a topic over 127 bytes selects the v2 magic. ValueError on
    out-of-range fields. Arguments may be positional (in layout order) on hot
    paths: binding 17 keywords costs as much as packing them."""
    if len(born_host) == 4 and len(store_host) == 4:
        fixed = _FIXED_V4
        sys_flag &= _NOT_V6_BITS
    else:
        fixed, v6_bits = _fixed_for_hosts(born_host, store_host)
        sys_flag = (sys_flag & _NOT_V6_BITS) | v6_bits
    topic_len = len(topic)
    props_len = len(properties)
    if props_len > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties of {props_len} bytes exceed {MAX_PROPERTIES_LENGTH}")
    if topic_len <= MAX_V1_TOPIC_LENGTH:
        magic = MESSAGE_MAGIC_V1
        topic_head = _V1_TOPIC_HEADS[topic_len]
    elif topic_len <= MAX_TOPIC_LENGTH:
        magic = MESSAGE_MAGIC_V2
        topic_head = _I16.pack(topic_len)
    else:
        raise ValueError(f"a topic of {topic_len} bytes exceeds {MAX_TOPIC_LENGTH}")
    body_len = len(body)
    if body_crc is None:
        body_crc = zlib.crc32(body) & _CRC_MASK
    try:
        head = fixed.pack(
            fixed.size + body_len + len(topic_head) + topic_len + 2 + props_len,
            magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            born_port,
            store_timestamp,
            store_host,
            store_port,
            reconsume_times,
            prepared_transaction_offset,
            body_len,
        )
    except struct.error as exc:
        raise ValueError(f"record field out of range: {exc}") from None
    return b"".join((head, body, topic_head, topic, _I16.pack(props_len), properties))


def _fixed_for_hosts(born_host: bytes, store_host: bytes) -> tuple[struct.Struct, int]:
    hosts = (len(born_host), len(store_host))
    fixed = _FIXED_BY_HOSTS.get(hosts)
    if fixed is None:
        raise ValueError(f"host addresses are 4 or 16 bytes, not {hosts}")
    return fixed, _V6_BITS_BY_HOSTS[hosts]


def patch_offsets(buf: bytearray, pos: int, queue_offset: int, physical_offset: int) -> None:
    """Re-stamp QUEUEOFFSET and PHYSICALOFFSET of the record at `pos` in place."""
    _TWO_I64.pack_into(buf, pos + QUEUE_OFFSET_POSITION, queue_offset, physical_offset)


# -- decoding -----------------------------------------------------------------


def peek_header(buf: Buffer, offset: int = 0) -> RecordHeader:
    """The fixed header fields of the record at `offset`, nothing else parsed
    and nothing validated but the buffer length (recovery checks the magic)."""
    if offset < 0:
        raise ProtocolError(f"negative offset {offset}")
    try:
        total, magic, crc, queue_id, _flag, queue_offset, physical, flags = _HEAD.unpack_from(
            buf, offset
        )
        store_ts_pos = offset + (68 if flags & sysflag.BORNHOST_V6 else 56)
        (store_timestamp,) = _I64.unpack_from(buf, store_ts_pos)
    except struct.error:
        raise ProtocolError(f"no record header at {offset}") from None
    return RecordHeader(total, magic, crc, queue_id, queue_offset, physical, flags, store_timestamp)


def _topic_length_size(magic: int) -> int:
    if magic == MESSAGE_MAGIC_V1:
        return 1
    if magic == MESSAGE_MAGIC_V2:
        return 2
    raise ProtocolError(f"bad record magic {magic & 0xFFFFFFFF:#010x}")


def _fixed_for(flags: int) -> struct.Struct:
    return _FIXED_BY_V6_BITS[flags & _V6_BITS]


def _fixed_fields(buf: Buffer, offset: int) -> tuple[int, tuple[Any, ...], int]:
    """(SYSFLAG, the fixed part's fields TOTALSIZE..BODYLENGTH, its size) of
    the record at `offset`; the layout depends on the IPv6 bits of SYSFLAG."""
    try:
        (flags,) = _I32.unpack_from(buf, offset + SYSFLAG_POSITION)
        fixed = _fixed_for(flags)
        return flags, fixed.unpack_from(buf, offset), fixed.size
    except struct.error:
        raise ProtocolError(f"buffer too short for a record at {offset}") from None


def _locate_tail(
    buf: Buffer, offset: int, total: int, magic: int, fixed_size: int, body_len: int
) -> tuple[int, int, int, int]:
    """Check the variable part's lengths against TOTALSIZE.

    Returns (body start, topic start, topic length, properties length); the
    properties start right after the topic plus 2.
    """
    if body_len < 0:
        raise ProtocolError(f"negative body length {body_len}")
    end = offset + total
    if total < fixed_size or end > len(buf):
        raise ProtocolError(f"record at {offset} of size {total} overruns the buffer")
    tlen_size = _topic_length_size(magic)
    body_start = offset + fixed_size
    topic_len_pos = body_start + body_len
    if topic_len_pos + tlen_size > end:
        raise ProtocolError("body overruns the record")
    if tlen_size == 1:
        (topic_len,) = _I8.unpack_from(buf, topic_len_pos)
    else:
        (topic_len,) = _I16.unpack_from(buf, topic_len_pos)
    if topic_len < 0:
        raise ProtocolError(f"negative topic length {topic_len}")
    topic_start = topic_len_pos + tlen_size
    props_len_pos = topic_start + topic_len
    if props_len_pos + 2 > end:
        raise ProtocolError("topic overruns the record")
    (props_len,) = _I16.unpack_from(buf, props_len_pos)
    if props_len < 0:
        raise ProtocolError(f"negative properties length {props_len}")
    if props_len_pos + 2 + props_len != end:
        raise ProtocolError(
            f"TOTALSIZE {total} does not match the field lengths "
            f"({props_len_pos + 2 + props_len - offset})"
        )
    return body_start, topic_start, topic_len, props_len


def _utf8(buf: Buffer, start: int, length: int, what: str) -> str:
    try:
        return str(buf[start : start + length], "utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what} is not UTF-8") from None


def _address(ip: bytes, port: int) -> str:
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{ipaddress.IPv6Address(ip).compressed}]:{port}"


_HOST_TEXT_CACHE_LIMIT = 4096
_host_texts: dict[tuple[bytes, int], tuple[str, str]] = {}


def _host_text(ip: bytes, port: int) -> tuple[str, str]:
    """("ip:port", message-id prefix) of a host, cached: a pull body repeats a
    handful of hosts, and formatting them was a large part of decoding."""
    key = (ip, port)
    known = _host_texts.get(key)
    if known is None:
        if len(_host_texts) >= _HOST_TEXT_CACHE_LIMIT:
            _host_texts.clear()
        known = _host_texts[key] = (_address(ip, port), f"{ip.hex().upper()}{port & _U32:08X}")
    return known


def _inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, MAX_DECOMPRESSED_BODY)
    except zlib.error as exc:
        raise ProtocolError(f"compressed body does not inflate: {exc}") from None
    if not inflater.eof:
        raise ProtocolError("compressed body is truncated or inflates too large")
    return out


def decode_record(
    buf: Buffer, offset: int = 0, *, verify_crc: bool = False, decompress: bool = False
) -> tuple[MessageExt, int]:
    """The record at `offset` and its size. Bytes after the record are ignored.

    `verify_crc` checks BODYCRC against the stored body. `decompress` inflates
    a zlib body (SYSFLAG bit 0, compression type ZLIB or unset) and clears bit
    0 in the returned sys_flag; LZ4/ZSTD bodies are returned as stored, bit 0
    still set. Anything malformed raises ProtocolError.
    """
    if offset < 0:
        raise ProtocolError(f"negative offset {offset}")
    flags, fixed_fields, fixed_size = _fixed_fields(buf, offset)
    (
        total,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical,
        _flags,
        born_ts,
        born_ip,
        born_port,
        store_ts,
        store_ip,
        store_port,
        reconsume,
        prepared,
        body_len,
    ) = fixed_fields
    body_start, topic_start, topic_len, props_len = _locate_tail(
        buf, offset, total, magic, fixed_size, body_len
    )
    body = bytes(buf[body_start : body_start + body_len])
    if verify_crc and zlib.crc32(body) & _CRC_MASK != crc:
        raise ProtocolError(f"body CRC mismatch in the record at {offset}")
    if decompress and sysflag.compression_type(flags) == sysflag.COMPRESSION_ZLIB:
        body = _inflate(body)
        flags &= ~sysflag.COMPRESSED
    topic = _utf8(buf, topic_start, topic_len, "topic")
    raw_props = _utf8(buf, topic_start + topic_len + 2, props_len, "properties")
    store_host, id_prefix = _host_text(store_ip, store_port)
    message = MessageExt(
        topic=topic,
        body=body,
        flag=flag,
        properties=decode_properties(raw_props),
        queue_id=queue_id,
        store_size=total,
        queue_offset=queue_offset,
        sys_flag=flags,
        born_timestamp=born_ts,
        born_host=_host_text(born_ip, born_port)[0],
        store_timestamp=store_ts,
        store_host=store_host,
        msg_id=f"{id_prefix}{physical & _U64:016X}",
        commit_log_offset=physical,
        body_crc=crc,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    return message, total


def decode_records(
    buf: Buffer, *, verify_crc: bool = False, decompress: bool = False
) -> list[MessageExt]:
    """Every record of a run laid back to back (a pull response body)."""
    messages: list[MessageExt] = []
    offset = 0
    end = len(buf)
    while offset < end:
        message, size = decode_record(buf, offset, verify_crc=verify_crc, decompress=decompress)
        messages.append(message)
        offset += size
    return messages


def peek_topic_and_properties(buf: Buffer, offset: int = 0) -> tuple[str, str]:
    """The topic and the raw property string of the record at `offset`,
    skipping the body (the store's key and time searches)."""
    if offset < 0:
        raise ProtocolError(f"negative offset {offset}")
    try:
        total, magic = _TWO_I32.unpack_from(buf, offset)
        (flags,) = _I32.unpack_from(buf, offset + SYSFLAG_POSITION)
        fixed = _fixed_for(flags)
        (body_len,) = _I32.unpack_from(buf, offset + fixed.size - 4)
    except struct.error:
        raise ProtocolError(f"buffer too short for a record at {offset}") from None
    _, topic_start, topic_len, props_len = _locate_tail(
        buf, offset, total, magic, fixed.size, body_len
    )
    topic = _utf8(buf, topic_start, topic_len, "topic")
    return topic, _utf8(buf, topic_start + topic_len + 2, props_len, "properties")


def peek_properties(buf: Buffer, offset: int = 0) -> str:
    """The raw property string of the record at `offset` and nothing else: the
    per-record cost of a filtered scan (it skips the body and the topic, and of
    the length checks keeps the one that matters: the properties must end
    exactly where TOTALSIZE says the record does)."""
    try:
        total, magic = _TWO_I32.unpack_from(buf, offset)
        (flags,) = _I32.unpack_from(buf, offset + SYSFLAG_POSITION)
        fixed_size = _fixed_for(flags).size
        (body_len,) = _I32.unpack_from(buf, offset + fixed_size - 4)
        topic_len_pos = offset + fixed_size + body_len
        if magic == MESSAGE_MAGIC_V1:
            (topic_len,) = _I8.unpack_from(buf, topic_len_pos)
            props_len_pos = topic_len_pos + 1 + topic_len
        else:
            (topic_len,) = _I16.unpack_from(buf, topic_len_pos)
            props_len_pos = topic_len_pos + 2 + topic_len
        (props_len,) = _I16.unpack_from(buf, props_len_pos)
    except struct.error:
        raise ProtocolError(f"record at {offset} overruns the buffer") from None
    start = props_len_pos + 2
    if magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or body_len < 0 or topic_len < 0:
        raise ProtocolError(f"malformed record at {offset}")
    if props_len < 0 or start + props_len != offset + total or offset + total > len(buf):
        raise ProtocolError(f"TOTALSIZE {total} does not match the field lengths at {offset}")
    return _utf8(buf, start, props_len, "properties")


# -- batch bodies -------------------------------------------------------------


def encode_batch(messages: Sequence[Message]) -> bytes:
    """A SEND_BATCH_MESSAGE body (Java `MessageDecoder.encodeMessages`)."""
    parts: list[bytes] = []
    for message in messages:
        raw_props = encode_properties_bytes(message.properties)
        props_len = len(raw_props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"properties of {props_len} bytes exceed {MAX_PROPERTIES_LENGTH}")
        body_len = len(message.body)
        try:
            head = _BATCH_HEAD.pack(
                _BATCH_FIXED + body_len + props_len, 0, 0, message.flag, body_len
            )
        except struct.error as exc:
            raise ValueError(f"batch entry field out of range: {exc}") from None
        parts += (head, message.body, _I16.pack(props_len), raw_props)
    return b"".join(parts)


class BatchEntry(NamedTuple):
    """One entry of a batch body, properties left as the encoded string."""

    body: bytes
    flag: int
    properties: str


def split_batch(body: Buffer) -> list[BatchEntry]:
    """The entries of a SEND_BATCH_MESSAGE body without building messages.

    The broker's batch path: it stores the property string as sent, so
    parsing it into a dict and encoding it back (as `decode_batch` would)
    is work thrown away. Same checks as `decode_batch`.
    """
    entries: list[BatchEntry] = []
    head = _BATCH_HEAD.unpack_from
    props_len_at = _I16.unpack_from
    head_size = _BATCH_HEAD.size
    offset = 0
    end = len(body)
    while offset < end:
        if end - offset < _BATCH_FIXED:
            raise ProtocolError(f"truncated batch entry at {offset}")
        total, _magic, _crc, flag, body_len = head(body, offset)
        if body_len < 0:
            raise ProtocolError(f"negative body length {body_len} in batch entry at {offset}")
        body_start = offset + head_size
        props_len_pos = body_start + body_len
        if props_len_pos + 2 > end:
            raise ProtocolError(f"batch entry at {offset} overruns the body")
        (props_len,) = props_len_at(body, props_len_pos)
        if props_len < 0:
            raise ProtocolError(f"negative properties length in batch entry at {offset}")
        entry_end = props_len_pos + 2 + props_len
        if entry_end > end:
            raise ProtocolError(f"batch entry at {offset} overruns the body")
        if total != entry_end - offset:
            raise ProtocolError(
                f"batch entry at {offset}: TOTALSIZE {total} != {entry_end - offset}"
            )
        entries.append(
            BatchEntry(
                bytes(body[body_start:props_len_pos]),
                flag,
                _utf8(body, props_len_pos + 2, props_len, "properties"),
            )
        )
        offset = entry_end
    return entries


def decode_batch(body: Buffer, topic: str) -> list[Message]:
    """The messages of a SEND_BATCH_MESSAGE body, each given `topic`."""
    messages: list[Message] = []
    offset = 0
    end = len(body)
    while offset < end:
        if end - offset < _BATCH_FIXED:
            raise ProtocolError(f"truncated batch entry at {offset}")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, offset)
        if body_len < 0:
            raise ProtocolError(f"negative body length {body_len} in batch entry at {offset}")
        body_start = offset + _BATCH_HEAD.size
        props_len_pos = body_start + body_len
        if props_len_pos + 2 > end:
            raise ProtocolError(f"batch entry at {offset} overruns the body")
        (props_len,) = _I16.unpack_from(body, props_len_pos)
        if props_len < 0:
            raise ProtocolError(f"negative properties length in batch entry at {offset}")
        entry_end = props_len_pos + 2 + props_len
        if entry_end > end:
            raise ProtocolError(f"batch entry at {offset} overruns the body")
        if total != entry_end - offset:
            raise ProtocolError(
                f"batch entry at {offset}: TOTALSIZE {total} != {entry_end - offset}"
            )
        raw_props = _utf8(body, props_len_pos + 2, props_len, "properties")
        messages.append(
            Message(
                topic=topic,
                body=bytes(body[body_start:props_len_pos]),
                flag=flag,
                properties=decode_properties(raw_props),
            )
        )
        offset = entry_end
    return messages


# -- columns ------------------------------------------------------------------


@dataclass(slots=True)
class RecordColumns:
    """A run of records as parallel lists (no MessageExt per record): what a
    columnar reader such as the Spark source needs, decoded in one pass."""

    queue_id: list[int] = field(default_factory=list)
    queue_offset: list[int] = field(default_factory=list)
    born_timestamp: list[int] = field(default_factory=list)
    store_timestamp: list[int] = field(default_factory=list)
    reconsume_times: list[int] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    properties: list[str] = field(default_factory=list)
    """Raw property strings (`decode_properties` makes a dict)."""
    offset_msg_id: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.queue_offset)


def decode_record_columns(buf: Buffer, *, decompress: bool = True) -> RecordColumns:
    """Every record of a run laid back to back, as columns; the same checks as
    `decode_record` (a malformed record raises ProtocolError), zlib bodies
    inflated unless `decompress` is false."""
    columns = RecordColumns()
    offset = 0
    end = len(buf)
    view = memoryview(buf)
    while offset < end:
        flags, fixed_fields, fixed_size = _fixed_fields(buf, offset)
        (
            total,
            magic,
            _crc,
            queue_id,
            _flag,
            queue_offset,
            physical,
            _flags,
            born_ts,
            _born_ip,
            _born_port,
            store_ts,
            store_ip,
            store_port,
            reconsume,
            _prepared,
            body_len,
        ) = fixed_fields
        body_start, topic_start, topic_len, props_len = _locate_tail(
            buf, offset, total, magic, fixed_size, body_len
        )
        body = bytes(view[body_start : body_start + body_len])
        if decompress and sysflag.compression_type(flags) == sysflag.COMPRESSION_ZLIB:
            body = _inflate(body)
        columns.queue_id.append(queue_id)
        columns.queue_offset.append(queue_offset)
        columns.born_timestamp.append(born_ts)
        columns.store_timestamp.append(store_ts)
        columns.reconsume_times.append(reconsume)
        columns.body.append(body)
        columns.topic.append(_utf8(buf, topic_start, topic_len, "topic"))
        columns.properties.append(_utf8(buf, topic_start + topic_len + 2, props_len, "properties"))
        columns.offset_msg_id.append(f"{_host_text(store_ip, store_port)[1]}{physical & _U64:016X}")
        offset += total
    return columns
