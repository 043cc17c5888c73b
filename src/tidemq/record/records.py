"""The client-side record codecs, compiled when the extension was built.

`decode_records`, `decode_record_columns`, `encode_batch` and `split_batch`
are the compiled twins (`_records.c`, C through the CPython API) of the
functions of the same name in `tidemq.record.codec`, the pure-Python
reference: same signatures, same results, the same ProtocolError on a
malformed buffer. `batch_unique_ids` serves the producer's batch checks (its
Python twin is below). `IMPLEMENTATION` says which runs: "compiled", or
"python" when the extension is missing or `TIDEMQ_NO_EXTENSIONS=1`.

The compiled functions hand unusual inputs (a memoryview of wide items, a
non-bytes body, a dict subclass of properties, an out-of-range flag...) to
the Python twin, so those give exactly what Python gives, errors included.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

from tidemq.common import properties as props
from tidemq.common.errors import ProtocolError
from tidemq.common.message import Message, MessageExt
from tidemq.record import codec, native

__all__ = [
    "IMPLEMENTATION",
    "BatchEntry",
    "RecordColumns",
    "batch_unique_ids",
    "compiled_configuration",
    "decode_record_columns",
    "decode_records",
    "encode_batch",
    "python_batch_unique_ids",
    "split_batch",
]

BatchEntry = codec.BatchEntry
RecordColumns = codec.RecordColumns


def python_batch_unique_ids(
    messages: Sequence[Message], topic: str, wait: bool, make_unique_id: Callable[[], str]
) -> list[str] | None:
    """The UNIQ_KEY of every message of a batch, one made by `make_unique_id`
    (and set on the message) where it has none; None at the first message
    that fails a batch check: not a Message, another topic than `topic`, a
    delay level, another WAIT setting than `wait`, an empty body.

    The caller's checked loop then names the problem; the messages before the
    failing one keep the ids given, as that loop would have given them. The
    compiled twin may also answer None for inputs it leaves to that loop."""
    ids: list[str] = []
    for message in messages:
        if not isinstance(message, Message) or message.topic != topic:
            return None
        properties = message.properties
        if properties.get(props.DELAY, "0") not in ("", "0"):
            return None
        if message.wait_store_msg_ok != wait or not message.body:
            return None
        unique_id = properties.get(props.UNIQ_KEY)
        if not unique_id:
            unique_id = message.properties[props.UNIQ_KEY] = make_unique_id()
        ids.append(unique_id)
    return ids


batch_unique_ids = python_batch_unique_ids
decode_records = codec.decode_records
decode_record_columns = codec.decode_record_columns
encode_batch = codec.encode_batch
split_batch = codec.split_batch
_compiled = native.compiled("_records")


def compiled_configuration() -> dict[str, object]:
    """What the compiled module is configured with (`_records.configure`): the
    classes it builds and checks, and the Python functions it hands rare cases to."""
    return {
        "protocol_error": ProtocolError,
        "message": Message,
        "message_ext": MessageExt,
        "record_columns": codec.RecordColumns,
        "batch_entry": codec.BatchEntry,
        "inflate": codec._inflate,
        "host_text": codec._host_text,
        "crc32": zlib.crc32,
        "decode_records": codec.decode_records,
        "decode_record_columns": codec.decode_record_columns,
        "encode_batch": codec.encode_batch,
        "split_batch": codec.split_batch,
    }


if _compiled is not None:
    try:
        _compiled.configure(**compiled_configuration())
    except TypeError:  # the message classes changed shape: tests/unit/codec says so
        _compiled = None

if _compiled is not None:
    decode_records = _compiled.decode_records
    decode_record_columns = _compiled.decode_record_columns
    encode_batch = _compiled.encode_batch
    split_batch = _compiled.split_batch
    batch_unique_ids = _compiled.batch_unique_ids

IMPLEMENTATION = "python" if _compiled is None else "compiled"
"""Which implementation runs: "compiled" or "python"."""
