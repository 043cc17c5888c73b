"""Reading a parked commitlog record back into the message to deliver.

The delivery path rebuilds up to tens of thousands of messages a second, so it
reads only the fields it needs straight from the record (the layout of
`record.codec`) instead of decoding a full MessageExt: no property
dict, no host text, no message id.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from tidemq.common import sysflag
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2

_HEAD = struct.Struct(">iiiiiqqiq")
"""TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP."""
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")


class ParkedRecord(NamedTuple):
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    born_port: int
    store_timestamp: int
    reconsume_times: int
    body: bytes
    properties: str


def read_parked(raw: bytes) -> ParkedRecord:
    """The fields of one whole record; ProtocolError when it does not add up."""
    try:
        total, magic, _crc, _qid, flag, _qoff, _phys, flags, born_ts = _HEAD.unpack_from(raw, 0)
        pos = _HEAD.size
        born_len = 16 if flags & sysflag.BORNHOST_V6 else 4
        born_host = raw[pos : pos + born_len]
        (born_port,) = _I32.unpack_from(raw, pos + born_len)
        pos += born_len + 4
        (store_ts,) = _I64.unpack_from(raw, pos)
        pos += 8 + (16 if flags & sysflag.STOREHOST_V6 else 4) + 4
        (reconsume,) = _I32.unpack_from(raw, pos)
        pos += 4 + 8  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
        (body_len,) = _I32.unpack_from(raw, pos)
        pos += 4
        body = raw[pos : pos + body_len]
        pos += body_len
        if magic == MESSAGE_MAGIC_V1:
            topic_len = raw[pos]
            pos += 1 + topic_len
        elif magic == MESSAGE_MAGIC_V2:
            (topic_len,) = _I16.unpack_from(raw, pos)
            pos += 2 + topic_len
        else:
            raise ProtocolError(f"bad record magic {magic & 0xFFFFFFFF:#010x}")
        (props_len,) = _I16.unpack_from(raw, pos)
        pos += 2
        properties = raw[pos : pos + props_len].decode()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"parked record is malformed: {exc}") from None
    if body_len < 0 or props_len < 0 or pos + props_len != total or total != len(raw):
        raise ProtocolError("parked record lengths do not match its TOTALSIZE")
    return ParkedRecord(
        flag, flags, born_ts, born_host, born_port, store_ts, reconsume, body, properties
    )
