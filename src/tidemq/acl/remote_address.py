"""Remote-address patterns of ``plain_acl.yml``: which clients a rule admits.

``globalWhiteRemoteAddresses`` (no signature needed from these) and each
account's ``whiteRemoteAddress`` use RocketMQ's pattern language; a policy
written for a RocketMQ broker must admit exactly the same addresses here.
Source: apache/rocketmq rocketmq-all-4.9.8,
``acl/.../plain/RemoteAddressStrategyFactory.java`` (getRemoteAddressStrategy
and its strategies) and ``acl/.../common/AclUtils.java`` (getAddresses,
isScope, IPv6AddressCheck, v6ipProcess, expandIP); its unit test
``RemoteAddressStrategyTest.java`` gives the examples used in our tests.

The forms, checked in Java's order:

* blank (or None): matches nothing (BlankRemoteAddressStrategy);
* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*``: matches everything;
* ends with ``}``: ``192.168.1.{1,2,3}`` / ``1050::5:600:300c:{1,2}``, the
  text before ``{`` followed by each listed item;
* contains ``,``: a list of single addresses;
* contains ``*`` or ``-``: a range in one position: ``192.168.1.1-100``,
  ``192.168.1.*``, ``192.168.1-20.*``, ``192.*.*.*``; for IPv6 the last group
  (``1050::5:600:300c:1-200``, ``...:300c:*``) or the group before a final
  ``*`` (``1050::5:600:300c:1-20:*``);
* otherwise one IPv4 or IPv6 address.

Deliberately stricter than Java, so a typo is an error instead of a rule
that silently never (or too widely) matches: every fixed IPv4 octet of a
range must be a canonical 0-255 number (Java checks only some of them);
after an IPv4 range only ``*`` may follow (Java ignores what follows, so
``192.168.1-100.5`` would admit ``192.168.50.7``); a range position must
exist (Java's constructor accepts ``*.1.2.3`` and fails on first use); and
a range's bounds must be two numbers (Java ignores a third, ``1-2-3``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Protocol


class AddressMatcher(Protocol):
    """A parsed pattern."""

    @property
    def pattern(self) -> str: ...

    def matches(self, address: str) -> bool:
        """Whether a client at ``address`` (no port; brackets allowed) is admitted."""
        ...


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = address.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split(text: str, separator: str) -> list[str]:
    """commons-lang StringUtils.split: empty pieces dropped."""
    return [part for part in text.split(separator) if part]


@dataclass(frozen=True, slots=True)
class AnyAddress:
    """NullRemoteAddressStrategy: everyone."""

    pattern: str

    def matches(self, address: str) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class NoAddress:
    """BlankRemoteAddressStrategy: nobody."""

    pattern: str

    def matches(self, address: str) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class AddressSet:
    """One address, a comma list, or a ``{a,b}`` list (One/MultipleRemoteAddressStrategy).

    IPv6 addresses compare in full form, so ``::1`` matches
    ``0000:...:0001`` as in Java (expandIP)."""

    pattern: str
    addresses: frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]

    def matches(self, address: str) -> bool:
        ip = _ip(address)
        return ip is not None and ip in self.addresses


@dataclass(frozen=True, slots=True)
class _Range:
    """RangeRemoteAddressStrategy: fixed leading groups, then one group within
    [start, end]; any later groups are free. The subclasses say what a group
    is (an IPv4 octet, a 16-bit IPv6 group)."""

    pattern: str
    head: tuple[int, ...]
    start: int
    end: int

    def matches(self, address: str) -> bool:
        groups = self._groups(_ip(address))
        if groups is None:
            return False
        index = len(self.head)
        return groups[:index] == self.head and self.start <= groups[index] <= self.end

    @staticmethod
    def _groups(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> tuple[int, ...] | None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class IPv4Range(_Range):
    """A range of IPv4 addresses: groups are octets."""

    @staticmethod
    def _groups(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> tuple[int, ...] | None:
        return tuple(ip.packed) if isinstance(ip, ipaddress.IPv4Address) else None


@dataclass(frozen=True, slots=True)
class IPv6Range(_Range):
    """A range of IPv6 addresses: groups are the eight 16-bit groups."""

    @staticmethod
    def _groups(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> tuple[int, ...] | None:
        if not isinstance(ip, ipaddress.IPv6Address):
            return None
        packed = ip.packed
        return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))


_JAVA_BLANKS = "".join(chr(c) for c in range(0x21))
_MATCH_ALL = ("*", "*.*.*.*", "*:*:*:*:*:*:*:*")


def parse_pattern(text: str | None) -> AddressMatcher:
    """The matcher for a ``whiteRemoteAddress`` / ``globalWhiteRemoteAddresses`` entry.

    Raises ValueError naming the pattern when it is malformed."""
    if text is None or not text.strip():
        return NoAddress(text or "")
    if text in _MATCH_ALL:
        return AnyAddress(text)
    try:
        if text.endswith("}"):
            return AddressSet(text, _addresses(_brace_list(text)))
        if "," in text:
            return AddressSet(text, _addresses(_split(text, ",")))
        if "*" in text or "-" in text:
            return _ipv6_range(text) if ":" in text else _ipv4_range(text)
        return AddressSet(text, _addresses([text]))
    except ValueError as exc:
        raise ValueError(f"bad remote address pattern {text!r}: {exc}") from None


def _brace_list(text: str) -> list[str]:
    """AclUtils.getAddresses: the text before ``{`` + each listed item."""
    if ":" in text:
        last = _split(text, ":")[-1]
    else:
        parts = _split(text, ".")
        if len(parts) < 4:
            raise ValueError("an IPv4 list needs four parts, like 192.168.1.{1,2}")
        last = parts[-1]
    if not last.startswith("{"):
        raise ValueError("a {...} list must be the last part of the address")
    prefix = text[: text.index("{")]
    return [prefix + item for item in _split(last[1:-1], ",")]


def _addresses(items: list[str]) -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for item in items:
        try:
            found.add(ipaddress.ip_address(item))
        except ValueError:
            raise ValueError(f"{item!r} is not an IPv4 or IPv6 address") from None
    if not found:
        raise ValueError("no address given")
    return frozenset(found)


def _bounds(value: str, base: int, top: int) -> tuple[int, int]:
    """``*`` or ``start-end`` (AclUtils.isScope / isIPv6Scope bounds)."""
    if value == "*":
        return 0, top
    pieces = value.split("-")
    digits = "0123456789abcdefABCDEF"[: 10 if base == 10 else 22]
    if len(pieces) != 2 or not all(p and all(c in digits for c in p) for p in pieces):
        raise ValueError(f"{value!r} is not '*' or a range like 1-100")
    start, end = int(pieces[0], base), int(pieces[1], base)
    if not (0 <= start <= end <= top):
        raise ValueError(f"range {value!r} must satisfy 0 <= start <= end <= {top}")
    return start, end


def _ipv4_range(text: str) -> IPv4Range:
    parts = [p.strip(_JAVA_BLANKS) for p in _split(text, ".")]  # String.trim()
    if len(parts) != 4:
        raise ValueError("an IPv4 range needs four parts, like 192.168.*.* or 192.168.1.1-100")
    # Java looks for the range in positions 1, 2, 3, in that order.
    index = next((i for i in (1, 2, 3) if parts[i] == "*" or "-" in parts[i]), None)
    if index is None:
        raise ValueError("no '*' or 'a-b' in the second, third or fourth part")
    head: list[int] = []
    for octet in parts[:index]:
        if not octet.isdigit() or not octet.isascii() or (len(octet) > 1 and octet[0] == "0"):
            raise ValueError(f"{octet!r} is not a number from 0 to 255")
        if int(octet) > 255:
            raise ValueError(f"{octet!r} is not a number from 0 to 255")
        head.append(int(octet))
    start, end = _bounds(parts[index], 10, 255)
    if any(p != "*" for p in parts[index + 1 :]):
        raise ValueError("only '*' may follow the range part")
    return IPv4Range(text, tuple(head), start, end)


def _ipv6_range(text: str) -> IPv6Range:
    star, minus = "*" in text, "-" in text
    # AclUtils.IPv6AddressCheck: '*' only at the end; '-' in the last group,
    # or in the one before a final '*'.
    if star and text.index("*") != len(text) - 1:
        raise ValueError("'*' may only end an IPv6 pattern")
    last_colon = text.rindex(":")
    if star and minus:
        if text[last_colon:] != ":*":
            raise ValueError("an IPv6 range may only be followed by ':*'")
        before = text.rindex(":", 0, last_colon) if ":" in text[:last_colon] else -1
        if before < 0 or text.index("-") <= before:
            raise ValueError("the '-' range must be in the group before the final '*'")
        head_text, range_text, groups = text[:before], text[before + 1 : last_colon], 6
    else:
        if minus and text.index("-") <= last_colon:
            raise ValueError("the '-' range must be in the last group")
        head_text, range_text, groups = text[:last_colon], text[last_colon + 1 :], 7
    head = tuple(int(g, 16) for g in _expand(head_text, groups))
    start, end = _bounds(range_text, 16, 0xFFFF)
    return IPv6Range(text, head, start, end)


def _expand(head: str, part: int) -> list[str]:
    """AclUtils.expandIP on the part before the range: ``::`` is widened so the
    head has ``part`` groups; without ``::`` the groups stand as written."""
    if head.count(":") < part and "::" in head:
        head = head.replace("::", ":" * (part - head.count(":") + 1), 1)
    groups = head.split(":")
    if len(groups) > part:
        raise ValueError("too many groups before the range")
    for group in groups:
        if len(group) > 4 or any(c not in "0123456789abcdefABCDEF" for c in group):
            raise ValueError(f"{group!r} is not an IPv6 group")
    return [g or "0" for g in groups]
