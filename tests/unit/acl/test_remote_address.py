"""Remote-address patterns (RemoteAddressStrategyFactory), with Java's test examples."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl.remote_address import (
    AddressSet,
    AnyAddress,
    IPv4Range,
    IPv6Range,
    NoAddress,
    parse_pattern,
)


@pytest.mark.parametrize("pattern", ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"])
def test_match_all(pattern: str) -> None:
    matcher = parse_pattern(pattern)
    assert isinstance(matcher, AnyAddress)
    assert matcher.matches("10.1.2.3") and matcher.matches("::1")


@pytest.mark.parametrize("pattern", [None, "", "   "])
def test_blank_matches_nothing(pattern: str | None) -> None:
    matcher = parse_pattern(pattern)
    assert isinstance(matcher, NoAddress)
    assert not matcher.matches("127.0.0.1")


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "::1"]),
        ("127.0.0.1,127.0.0.2,127.0.0.3", ["127.0.0.2", "127.0.0.3"], ["127.0.0.4", "127.0.0.0"]),
        ("127.0.0.{1,2,3}", ["127.0.0.1", "127.0.0.3"], ["127.0.0.4", "127.0.0.0"]),
        ("192.168.1.{1}", ["192.168.1.1"], ["192.168.1.2"]),
        ("::1", ["0000:0000:0000:0000:0000:0000:0000:0001", "[::1]"], ["::2", "127.0.0.1"]),
        (
            "1050:0000:0000:0000:0005:0600:300c:326b",
            ["1050::5:600:300c:326B"],
            ["1050::5:600:300c:326a"],
        ),
        (
            "1050::0005:0600:300c:{1,2,3}",
            ["1050:0000:0000:0000:0005:0600:300c:2"],
            ["1050:0000:0000:0000:0005:0600:300c:4", "1050:0000:0000:0000:0005:0600:300c:0"],
        ),
        ("127.0.0.1-200", ["127.0.0.1", "127.0.0.200"], ["127.0.0.0", "127.0.0.201", "127.0.1.5"]),
        ("127.0.0.*", ["127.0.0.0", "127.0.0.255"], ["127.0.1.0"]),
        ("127.0.1-20.*", ["127.0.1.0", "127.0.20.255"], ["127.0.21.1", "127.0.0.1"]),
        ("192.100-150.*.*", ["192.130.0.2"], ["192.151.0.2", "193.130.0.2"]),
        ("127.*.*.*", ["127.255.0.9"], ["128.0.0.1", "::1"]),
        (
            "1050::0005:0600:300c:1-200",
            ["1050::5:600:300c:1", "1050::5:600:300c:200"],
            ["1050::5:600:300c:201"],
        ),
        ("1050::0005:0600:300c:*", ["1050::5:600:300c:ffff"], ["1050::5:600:3001:1", "10.0.0.1"]),
        (
            "1050::0005:0600:300c:1-200:*",
            ["1050::5:600:300c:1:0", "1050::5:600:300c:200:ffff"],
            ["1050::5:600:300c:201:0", "1050::5:600:300c:0:1"],
        ),
        ("1050:0005:0600:300c:3261:*", ["1050:5:600:300c:3261:9::"], ["1050:5:600:300c:3262:9::"]),
    ],
)
def test_java_examples(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = parse_pattern(pattern)
    assert matcher.pattern == pattern
    for address in yes:
        assert matcher.matches(address), address
    for address in no:
        assert not matcher.matches(address), address


@pytest.mark.parametrize(
    "pattern",
    [
        "256.0.0.1",
        "::1ggg",
        "127.0.0.1,2,3}",
        "::1,2,3}",
        "192.168.{1}",
        "{192.168.1}",
        "{192.168.1.1}",
        "192.168.1.{1, 2}",
        "127.0.0.2-1",
        "127.0.0.-1-200",
        "127.0.0.0-256",
        "127.0.0.1-2-3",
        "192.168.*",
        "*.1.2.3",
        "192.168.1-100.5",
        "192.168.01.*",
        "300.168.1.*",
        "1050::*:1",
        "1050::1-5:6",
        "1050::1-5:6:*",
        "1050::0005:0600:300c:1-fffff",
        "1.1.1.1, 2.2.2.2",
        "localhost",
    ],
)
def test_bad_patterns_raise_naming_the_pattern(pattern: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_pattern(pattern)
    assert repr(pattern) in str(info.value)


def test_garbage_address_never_matches() -> None:
    for pattern in ("127.0.0.1", "127.0.0.*", "1050::*", "127.0.0.{1,2}"):
        assert not parse_pattern(pattern).matches("not an address")


def test_kinds() -> None:
    assert isinstance(parse_pattern("10.0.0.1"), AddressSet)
    assert isinstance(parse_pattern("10.0.0.1-9"), IPv4Range)
    assert isinstance(parse_pattern("1050::1-9"), IPv6Range)


octet = st.integers(0, 255)


@given(octet, octet, octet, st.integers(0, 255), st.integers(0, 255))
def test_ipv4_range_admits_exactly_its_range(a: int, b: int, c: int, x: int, y: int) -> None:
    start, end = min(x, y), max(x, y)
    matcher = parse_pattern(f"{a}.{b}.{c}.{start}-{end}")
    for last in range(256):
        assert matcher.matches(f"{a}.{b}.{c}.{last}") == (start <= last <= end)
    assert not matcher.matches(f"{a}.{b}.{(c + 1) % 256}.{start}")


@given(octet, octet, st.integers(0, 255), st.integers(0, 255), octet)
def test_ipv4_third_octet_range(a: int, b: int, x: int, y: int, last: int) -> None:
    start, end = min(x, y), max(x, y)
    matcher = parse_pattern(f"{a}.{b}.{start}-{end}.*")
    assert matcher.matches(f"{a}.{b}.{start}.{last}")
    assert matcher.matches(f"{a}.{b}.{end}.{last}")
    if start > 0:
        assert not matcher.matches(f"{a}.{b}.{start - 1}.{last}")
    if end < 255:
        assert not matcher.matches(f"{a}.{b}.{end + 1}.{last}")
    assert not matcher.matches(f"{a}.{(b + 1) % 256}.{start}.{last}")


@given(
    st.lists(st.integers(0, 0xFFFF), min_size=7, max_size=7),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF),
)
def test_ipv6_last_group_range(head: list[int], x: int, y: int) -> None:
    start, end = min(x, y), max(x, y)
    prefix = ":".join(f"{g:x}" for g in head)
    matcher = parse_pattern(f"{prefix}:{start:x}-{end:x}")

    def address(last: int) -> str:
        return str(ipaddress.IPv6Address(bytes.fromhex("".join(f"{g:04x}" for g in [*head, last]))))

    assert matcher.matches(address(start)) and matcher.matches(address(end))
    assert matcher.matches(address((start + end) // 2))
    if start > 0:
        assert not matcher.matches(address(start - 1))
    if end < 0xFFFF:
        assert not matcher.matches(address(end + 1))


@given(st.sets(st.integers(0, 255), min_size=1, max_size=6), octet)
def test_brace_list_admits_exactly_its_members(members: set[int], probe: int) -> None:
    matcher = parse_pattern("10.0.0.{" + ",".join(str(m) for m in sorted(members)) + "}")
    assert matcher.matches(f"10.0.0.{probe}") == (probe in members)
    assert not matcher.matches(f"10.0.1.{min(members)}")
