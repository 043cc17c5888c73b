"""The two RocketMQ message ids.

Offset message id (`msgId` in pull results, "offsetMsgId" in Java clients),
built by the broker (`MessageDecoder.createMessageId`): upper-case hex of

    store host IP (4 bytes, or 16 for IPv6) | store port (int32 BE) | commit log offset (int64 BE)

32 hex chars for IPv4, 56 for IPv6. It locates the record: a broker can
serve VIEW_MESSAGE_BY_ID from it alone.

Unique id (property UNIQ_KEY, Java `MessageClientIDSetter`), made by the
client: upper-case hex of

    offset  size  field
    0       4|16  IP of the client (16 bytes when the host only has IPv6)
    4|16    2     pid & 0xFFFF
    6|18    4     Java: class-loader hashCode; here: random bits per generator
    10|22   4     ms since the start of the current month (uint32)
    14|26   2     counter, wraps at 65536

32 hex chars with an IPv4 address, 56 with an IPv6 one. Java computes the
month start in the JVM's local time zone; here the zone is a parameter
(UTC by default), used identically when reading the time back.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import struct
import threading
from datetime import UTC, datetime, tzinfo
from typing import NamedTuple

from tidemq.common.clock import Clock

_PORT_OFFSET = struct.Struct(">iq")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def host_text(host: bytes) -> str:
    """Dotted IPv4 or compressed IPv6 text for a 4- or 16-byte address."""
    if len(host) == 4:
        return f"{host[0]}.{host[1]}.{host[2]}.{host[3]}"
    if len(host) == 16:
        return ipaddress.IPv6Address(host).compressed
    raise ValueError(f"an IP address is 4 or 16 bytes, not {len(host)}")


def host_bytes(text: str) -> bytes:
    """The packed form of an IPv4 or IPv6 address text (ValueError if invalid)."""
    return ipaddress.ip_address(text).packed


def _hex_bytes(text: str, allowed_lengths: tuple[int, ...], what: str) -> bytes:
    if len(text) not in allowed_lengths or not _HEX_DIGITS.issuperset(text):
        raise ValueError(f"malformed {what}: {text!r}")
    return bytes.fromhex(text)


# -- offset message ids -------------------------------------------------------


def offset_message_id(host: bytes, port: int, physical_offset: int) -> str:
    """The offset message id of the record at `physical_offset` on `host:port`."""
    if len(host) not in (4, 16):
        raise ValueError(f"an IP address is 4 or 16 bytes, not {len(host)}")
    try:
        tail = _PORT_OFFSET.pack(port, physical_offset)
    except struct.error as exc:
        raise ValueError(f"port or offset out of range: {exc}") from None
    return (host + tail).hex().upper()


def decode_offset_message_id(msg_id: str) -> tuple[str, int, int]:
    """(host text, port, commit log offset) of an offset message id."""
    raw = _hex_bytes(msg_id, (32, 56), "offset message id")
    ip_len = len(raw) - 12
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return host_text(raw[:ip_len]), port, offset


def offset_message_id_address(msg_id: str) -> str | None:
    """ "host:port" of the broker an offset message id names; None when `msg_id`
    cannot be one: not 32 or 56 hex digits, or a port outside 1..65535 (a
    unique id read this way puts its pid and salt where the port goes, which
    is out of range unless the pid's low 16 bits are 0)."""
    try:
        host, port, offset = decode_offset_message_id(msg_id)
    except ValueError:
        return None
    if not 0 < port < 65536 or offset < 0:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# -- unique (client) ids ------------------------------------------------------


class UniqueIdParts(NamedTuple):
    ip: str
    pid: int
    salt: int
    """The 4 bytes Java fills with the class loader's hashCode."""
    month_span_ms: int
    """Milliseconds since the start of the month the id was made in."""
    counter: int


def month_bounds_ms(now_ms: int, tz: tzinfo = UTC) -> tuple[int, int]:
    """Epoch ms of the start of the month containing `now_ms` and of the next one."""
    moment = datetime.fromtimestamp(now_ms / 1000, tz)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.month == 12:
        following = start.replace(year=start.year + 1, month=1)
    else:
        following = start.replace(month=start.month + 1)
    return round(start.timestamp() * 1000), round(following.timestamp() * 1000)


class UniqueIdGenerator:
    """Makes UNIQ_KEY ids in RocketMQ's format (layout in the module docstring).

    Ids are unique per generator: the (time, counter) pair never repeats
    within a month. When more than 65536 ids are made in one millisecond, or
    the clock stands still or goes back, the time part borrows the next
    millisecond rather than wrap the counter onto an id already issued.

    `ip` None uses Java's fallback: the low 4 bytes of the current time (no
    network lookup here). `pid` None is this process id; `salt` None is random.
    """

    def __init__(
        self,
        clock: Clock,
        ip: bytes | None = None,
        pid: int | None = None,
        *,
        salt: int | None = None,
        tz: tzinfo = UTC,
    ) -> None:
        if ip is None:
            ip = (clock.now_ms() & 0xFFFFFFFF).to_bytes(4, "big")
        if len(ip) not in (4, 16):
            raise ValueError(f"an IP address is 4 or 16 bytes, not {len(ip)}")
        pid = os.getpid() if pid is None else pid
        salt = secrets.randbits(32) if salt is None else salt
        fixed = ip + (pid & 0xFFFF).to_bytes(2, "big") + (salt & 0xFFFFFFFF).to_bytes(4, "big")
        self._prefix = fixed.hex().upper()
        self._clock = clock
        self._tz = tz
        self._lock = threading.Lock()
        self._month_start = 0
        self._next_month_start = -1
        self._counter = -1
        self._time = -1
        """Time part of the last id; never decreases within a month."""
        self._first_counter = 0
        """Counter of the first id issued with time part `_time`."""
        self._head_time = -1
        self._head = ""
        """`_prefix` and the hex time part `_head_time`: ids made within one
        millisecond share it, so most ids format only their counter."""

    @property
    def prefix(self) -> str:
        """The fixed hex prefix (IP, pid, salt) shared by all ids of this generator."""
        return self._prefix

    def next_id(self) -> str:
        now = self._clock.now_ms()
        with self._lock:
            if not self._month_start <= now < self._next_month_start:
                self._month_start, self._next_month_start = month_bounds_ms(now, self._tz)
                self._time = -1
            counter = (self._counter + 1) & 0xFFFF
            self._counter = counter
            span = now - self._month_start
            if span > self._time:
                self._time = span
                self._first_counter = counter
            elif counter == self._first_counter:
                self._time += 1
            time_part = self._time
            if time_part != self._head_time:
                self._head = f"{self._prefix}{time_part & 0xFFFFFFFF:08X}"
                self._head_time = time_part
            head = self._head
        return f"{head}{counter:04X}"

    __call__ = next_id


def parse_unique_id(unique_id: str) -> UniqueIdParts:
    """Split a 32- or 56-hex-char unique id into its fields (ValueError if malformed)."""
    raw = _hex_bytes(unique_id, (32, 56), "unique message id")
    ip_len = len(raw) - 12
    pid, salt, span, counter = struct.unpack_from(">HIIH", raw, ip_len)
    return UniqueIdParts(host_text(raw[:ip_len]), pid, salt, span, counter)


def nearly_time_from_id(unique_id: str, now_ms: int, tz: tzinfo = UTC) -> int:
    """Epoch ms at which a unique id was made, as Java's `getNearlyTimeFromID`.

    The id only holds ms since the start of *its* month: it is placed in the
    month of `now_ms`, or in the previous month if that would be now or later.
    """
    span = parse_unique_id(unique_id).month_span_ms
    start, _ = month_bounds_ms(now_ms, tz)
    if start + span >= now_ms:
        previous = datetime.fromtimestamp(start / 1000, tz)
        if previous.month == 1:
            previous = previous.replace(year=previous.year - 1, month=12)
        else:
            previous = previous.replace(month=previous.month - 1)
        start = round(previous.timestamp() * 1000)
    return start + span
