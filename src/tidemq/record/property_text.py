"""What the Python twins of the compiled record builders share (the twin of
`_property_text.h`): the checks on a property string kept as sent, the
index key hashes, and the entry layouts they pack.

`batch_append` (SEND_BATCH bodies) and `transaction_records` (runs of halves
and ENDs) both build commitlog records with their consumequeue and index
entries; these pieces are the same for both, so they are written once.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from tidemq.common import properties as props
from tidemq.common.hashing import java_string_hash_uncached

CLUSTER_KEY = props.CLUSTER + props.NAME_VALUE_SEPARATOR
STAMPED_KEYS = (
    props.MSG_REGION + props.NAME_VALUE_SEPARATOR,
    props.TRACE_ON + props.NAME_VALUE_SEPARATOR,
)
"""The keys of the broker's send stamp: a property string that already holds
one takes the general path, which replaces it (the builders only append)."""
CQ_ENTRY = struct.Struct(">qiq")
"""Consumequeue entry: physical offset, size, tags code."""
INDEX_ENTRY = struct.Struct(">qi")
"""One index entry as the builders hand it to the store: physical offset, key hash."""
MAX_KEYS = 64
"""More distinct keys than this in one message go to the general path."""
_INT32_MIN = -(2**31)


def plain_well_formed(raw: str) -> bool:
    """The property string is ASCII and every item is `key\\x01value\\x02` (the
    send processor keeps such a string as sent)."""
    if not raw:
        return True
    return (
        raw.isascii()
        and raw.endswith("\x02")
        and not raw.startswith("\x01")
        and raw.count("\x01") == raw.count("\x02")
        and "\x02\x01" not in raw
    )


def last_value(raw: str, key: str) -> str | None:
    """The value of the last `key` in a well-formed property text (the one a
    decoded property map keeps), as ``find_value`` in _property_text.h finds it."""
    found = None
    for item in raw.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name == key:
            found = value
    return found


def index_hash(topic: str, key: str) -> int:
    """RocketMQ's index keyHash of `topic#key`: abs of the Java hash, 0 when
    abs overflows."""
    signed = java_string_hash_uncached(f"{topic}#{key}")
    return 0 if signed == _INT32_MIN else abs(signed)


def index_hashes(topic: str, parsed: Mapping[str, str]) -> list[int] | None:
    """IndexService._key_hashes of one record (its unique key, then each of its
    keys, without repeats); None past MAX_KEYS distinct keys."""
    hashes: list[int] = []
    unique_key = parsed.get(props.UNIQ_KEY)
    if unique_key:
        hashes.append(index_hash(topic, unique_key))
    keys = parsed.get(props.KEYS)
    if keys is not None:
        for key in keys.split(" "):
            if key:
                key_hash = index_hash(topic, key)
                if key_hash not in hashes:
                    if len(hashes) == MAX_KEYS:
                        return None
                    hashes.append(key_hash)
    return hashes


def holds_stamped_key(raw: str, stamp: str) -> bool:
    """Whether appending `stamp` to `raw` would leave a second MSG_REGION or
    TRACE_ON (the twin of `holds_stamped_key` in _property_text.h)."""
    return bool(stamp) and any(key in raw for key in STAMPED_KEYS)
