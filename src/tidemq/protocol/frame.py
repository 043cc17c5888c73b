"""Length-prefixed remoting frames: bytes in, frames out.

Frames are written back to back on one TCP stream, all integers big-endian::

    offset  size          field
    0       4             totalLength (int32) = 4 + headerLength + bodyLength;
                          it does not count itself, so a frame is 4 + totalLength bytes
    4       4             serializeType << 24 | headerLength
                          (high byte 0 = JSON, 1 = ROCKETMQ binary; low 24 bits)
    8       headerLength  header (see command.py)
    8+h     the rest      body (raw bytes, may be empty)

A declared totalLength above MAX_FRAME_SIZE (16 MiB, the Java default of
``com.rocketmq.remoting.frameMaxLength``), a negative or too small length, a
header longer than the frame or an unknown serialize type raise ProtocolError
as soon as the 8 prefix bytes have arrived, so a hostile peer can never make
the decoder buffer more than one maximal frame (plus whatever one ``feed``
call hands over).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeAlias

from .codes import SerializeType
from .errors import ProtocolError

MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest accepted totalLength (the 4 length bytes themselves not counted)."""

PREFIX_SIZE = 8
_LENGTH_SIZE = 4
_HEADER_LENGTH_MASK = 0xFFFFFF
MAX_HEADER_SIZE = _HEADER_LENGTH_MASK

_PREFIX = struct.Struct(">iI")
_TOTAL_LENGTH = struct.Struct(">i")
_SERIALIZE_TYPES = {int(member): member for member in SerializeType}

BytesLike: TypeAlias = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete frame; the header is still undecoded (see command.decode_command)."""

    serialize_type: int
    header: bytes
    body: bytes


def frame_prefix(serialize_type: int, header_length: int, body_length: int) -> bytes:
    """The 8 bytes before a header, for writers that send header and body separately."""
    if serialize_type not in _SERIALIZE_TYPES:
        raise ProtocolError(f"unknown serialize type {serialize_type}")
    if not 0 <= header_length <= MAX_HEADER_SIZE:
        raise ProtocolError(f"header of {header_length} bytes does not fit 24 bits")
    if body_length < 0:
        raise ProtocolError(f"negative body length {body_length}")
    total_length = _LENGTH_SIZE + header_length + body_length
    if total_length > MAX_FRAME_SIZE:
        raise ProtocolError(f"frame of {total_length} bytes exceeds {MAX_FRAME_SIZE}")
    return _PREFIX.pack(total_length, serialize_type << 24 | header_length)


def encode_frame(serialize_type: int, header: BytesLike, body: BytesLike = b"") -> bytes:
    """The whole frame as one bytes object (header and body may be memoryviews)."""
    prefix = frame_prefix(serialize_type, _byte_length(header), _byte_length(body))
    return b"".join((prefix, header, body))


class FrameDecoder:
    """Cuts a byte stream into frames, holding back an incomplete tail.

    ``feed`` is O(len(data)) amortised however the stream is split: the buffer
    is a bytearray with a read position that is compacted only when the
    consumed part outweighs what remains. After a ProtocolError the stream
    position is lost, so the decoder stays failed and the connection must be
    closed; frames completed earlier in the failing chunk are dropped with it.
    """

    __slots__ = ("_buffer", "_failure", "_max_frame_size", "_start")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._buffer = bytearray()
        self._start = 0
        self._max_frame_size = max_frame_size
        self._failure: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer) - self._start

    @property
    def pending_frame_size(self) -> int:
        """What the incomplete frame held back will occupy once whole (4 + totalLength).

        While fewer than 4 bytes of it have arrived, the bytes held; 0 when
        nothing is held. A server that bounds the memory of frames still
        arriving (transport/frame_budget.py) reserves this much.
        """
        held = len(self._buffer) - self._start
        if held < _LENGTH_SIZE:
            return held
        (total_length,) = _TOTAL_LENGTH.unpack_from(self._buffer, self._start)
        return _LENGTH_SIZE + int(total_length)

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def feed(self, data: BytesLike) -> list[Frame]:
        """Add received bytes; return every frame they complete, in stream order."""
        if self._failure is not None:
            raise ProtocolError(f"frame decoder already failed: {self._failure}")
        try:
            if self._start == len(self._buffer):
                with _as_bytes_view(data) as view:
                    return self._feed_unbuffered(view)
            self._buffer += data
            frames, self._start = _split_frames(self._buffer, self._start, self._max_frame_size)
            self._compact()
            return frames
        except ProtocolError as exc:
            self._failure = str(exc)
            self._buffer = bytearray()
            self._start = 0
            raise

    def _feed_unbuffered(self, view: memoryview) -> list[Frame]:
        # Nothing held back: cut frames straight out of the caller's data and
        # copy only the incomplete tail.
        frames, end = _split_frames(view, 0, self._max_frame_size)
        self._buffer = bytearray(view[end:])
        self._start = 0
        return frames

    def _compact(self) -> None:
        start = self._start
        remaining = len(self._buffer) - start
        if remaining == 0:
            self._buffer.clear()
            self._start = 0
        elif start >= remaining:
            del self._buffer[:start]
            self._start = 0


def _split_frames(
    buffer: bytearray | memoryview, start: int, max_frame_size: int
) -> tuple[list[Frame], int]:
    """Parse complete frames from ``buffer[start:]``; return them and the new start."""
    frames: list[Frame] = []
    end = len(buffer)
    position = start
    with memoryview(buffer) as view:
        while end - position >= _LENGTH_SIZE:
            (total_length,) = _TOTAL_LENGTH.unpack_from(view, position)
            if total_length > max_frame_size:
                raise ProtocolError(f"frame length {total_length} exceeds {max_frame_size}")
            if total_length < _LENGTH_SIZE:
                raise ProtocolError(f"frame length {total_length} is below {_LENGTH_SIZE}")
            if end - position < PREFIX_SIZE:
                break
            (_, type_and_header_length) = _PREFIX.unpack_from(view, position)
            serialize_type = _SERIALIZE_TYPES.get(type_and_header_length >> 24)
            if serialize_type is None:
                raise ProtocolError(f"unknown serialize type {type_and_header_length >> 24}")
            header_length = type_and_header_length & _HEADER_LENGTH_MASK
            if header_length > total_length - _LENGTH_SIZE:
                raise ProtocolError(
                    f"header length {header_length} exceeds frame length {total_length}"
                )
            frame_end = position + _LENGTH_SIZE + total_length
            if frame_end > end:
                break
            header_start = position + PREFIX_SIZE
            body_start = header_start + header_length
            frames.append(
                Frame(
                    serialize_type,
                    bytes(view[header_start:body_start]),
                    bytes(view[body_start:frame_end]),
                )
            )
            position = frame_end
    return frames, position


def _as_bytes_view(data: BytesLike) -> memoryview:
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def _byte_length(data: BytesLike) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)
