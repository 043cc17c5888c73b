"""The HA stream between a master and its slaves: bytes in, transfers and reports out.

RocketMQ 4.x replicates the commitlog over a plain TCP connection of its own
(the master's HA port), not over remoting frames. All integers are big-endian.

Slave to master, a **report** (DefaultHAClient.REPORT_HEADER_SIZE = 8)::

    offset  size  field
    0       8     slaveMaxOffset (int64): the commitlog offset the slave has

The first report says where the master should start; later ones acknowledge
what arrived (a SYNC_MASTER answers a send once a report reaches the
message's end). Reports come after every append and at least every
heartbeat interval.

Master to slave, a **transfer** (DefaultHAConnection.TRANSFER_HEADER_SIZE = 12)::

    offset  size      field
    0       8         physicOffset (int64): the commitlog offset of the first byte
    8       4         bodySize (int32)
    12      bodySize  the commitlog's bytes from physicOffset on, as they lie in its file

A transfer with bodySize 0 is a heartbeat: it says where the master's next
bytes will start (the slave's offset, or the master's end when the slave is
ahead of it). A body never spans two commitlog files and holds at most the
master's batch size (haTransferBatchSize, 32 KiB by default); it may end in
the middle of a record, the next transfer continues it.

The Java slave keeps only the last complete report in what one read brought
(DefaultHAConnection.ReadSocketService); `ReportDecoder` does the same and
holds back a partial one. A transfer whose size is negative or above the
decoder's bound raises ProtocolError at once, so a peer that is not a tidemq
or RocketMQ master cannot make the slave buffer more than one bounded body.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import ProtocolError

REPORT_SIZE = 8
TRANSFER_HEADER_SIZE = 12
DEFAULT_MAX_TRANSFER_BODY = 4 * 1024 * 1024
"""The slave's bound on one body: RocketMQ's HAClient reads into a 4 MiB buffer
(READ_MAX_BUFFER_SIZE), so no master sends more at once."""

_REPORT = struct.Struct(">q")
_TRANSFER_HEADER = struct.Struct(">qi")


def encode_report(offset: int) -> bytes:
    """A slave's report of the commitlog offset it has."""
    if offset < 0:
        raise ProtocolError(f"a report offset cannot be negative: {offset}")
    return _REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    """The 12 bytes before a transfer's body (size 0: a heartbeat)."""
    if offset < 0 or size < 0:
        raise ProtocolError(f"a transfer needs a non-negative offset and size: {offset}, {size}")
    return _TRANSFER_HEADER.pack(offset, size)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One transfer from the master: `body` belongs at commitlog `offset`."""

    offset: int
    body: bytes

    @property
    def end(self) -> int:
        return self.offset + len(self.body)

    @property
    def heartbeat(self) -> bool:
        return not self.body


class TransferDecoder:
    """Cuts the master's stream into transfers, holding back an incomplete one.

    After a ProtocolError the stream position is lost: the decoder stays
    failed and the connection must be closed.
    """

    __slots__ = ("_buffer", "_failed", "_max_body", "_position")

    def __init__(self, max_body: int = DEFAULT_MAX_TRANSFER_BODY) -> None:
        if max_body < 1:
            raise ValueError("the body bound must be positive")
        self._max_body = max_body
        self._buffer = bytearray()
        self._position = 0
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out."""
        return len(self._buffer) - self._position

    def feed(self, data: bytes | bytearray | memoryview) -> list[Transfer]:
        if self._failed:
            raise ProtocolError("the HA stream failed earlier; close the connection")
        buffer = self._buffer
        buffer += data
        transfers: list[Transfer] = []
        position = self._position
        while len(buffer) - position >= TRANSFER_HEADER_SIZE:
            offset, size = _TRANSFER_HEADER.unpack_from(buffer, position)
            if offset < 0 or size < 0 or size > self._max_body:
                self._failed = True
                raise ProtocolError(
                    f"bad HA transfer header: offset {offset}, body size {size} "
                    f"(at most {self._max_body})"
                )
            start = position + TRANSFER_HEADER_SIZE
            if len(buffer) - start < size:
                break
            transfers.append(Transfer(offset, bytes(buffer[start : start + size])))
            position = start + size
        if position and position * 2 >= len(buffer):
            del buffer[:position]
            position = 0
        self._position = position
        return transfers


class ReportDecoder:
    """The slave's reports: the last complete one of each feed, as Java reads them."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """The offset of the last complete report in `data` (with what an earlier
        feed held back), or None when no report completed."""
        joined = self._partial + bytes(data)
        whole = len(joined) - len(joined) % REPORT_SIZE
        self._partial = joined[whole:]
        if whole == 0:
            return None
        (offset,) = _REPORT.unpack_from(joined, whole - REPORT_SIZE)
        if offset < 0:
            raise ProtocolError(f"a slave reported a negative offset: {offset}")
        return int(offset)


HELLO_SIZE = 12
HELLO_MAGIC = b"TDID"
_HELLO = struct.Struct(">4sq")


def encode_hello(replica_id: int) -> bytes:
    """A controller-mode slave's first 12 bytes: ``TDID`` and its replica id
    (int64), so that its master knows whose reports these are (RocketMQ's
    AutoSwitchHAClient says who it is in its handshake for the same reason)."""
    if replica_id < 0:
        raise ProtocolError(f"a replica id cannot be negative: {replica_id}")
    return _HELLO.pack(HELLO_MAGIC, replica_id)


def decode_hello(data: bytes) -> int:
    """The replica id of a hello; ProtocolError when the 12 bytes are not one."""
    if len(data) != HELLO_SIZE:
        raise ProtocolError(f"an HA hello is {HELLO_SIZE} bytes, not {len(data)}")
    magic, replica_id = _HELLO.unpack(data)
    if magic != HELLO_MAGIC or replica_id < 0:
        raise ProtocolError(
            "the slave did not say which replica it is (a slave not in controller mode?)"
        )
    return int(replica_id)
