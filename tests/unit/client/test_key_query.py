"""Paging a key query through a broker's index (client/_key_query.py), against
model brokers: tidemq's (a cursor) and Java's (time ranges only, index times
kept to the second, at most 64 records a page)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client._key_query import KeyQueryResult, merge, search_pages
from tidemq.common.message import MessageExt

FILE_BEGIN_MS = 1_700_000_000_123


def record(offset: int, stored_ms: int, key: str = "K", host: str = "b:1") -> MessageExt:
    return MessageExt(
        topic="T",
        body=b"x",
        properties={"KEYS": key},
        store_timestamp=stored_ms,
        store_host=host,
        commit_log_offset=offset,
        msg_id=f"{offset:032X}",
    )


@dataclass
class ModelBroker:
    """QUERY_MESSAGE over one index: newest first, `cap` records a page."""

    records: list[MessageExt]
    cursor: bool
    cap: int = 64
    requests: int = 0

    async def page(self, end_ms: int, below: int) -> tuple[list[MessageExt], bool]:
        self.requests += 1

        def index_time(m: MessageExt) -> int:  # IndexFile keeps seconds from its start
            return FILE_BEGIN_MS + (m.store_timestamp - FILE_BEGIN_MS) // 1000 * 1000

        newest_first = sorted(self.records, key=lambda m: m.commit_log_offset, reverse=True)
        hits = [
            m
            for m in newest_first
            if index_time(m) <= end_ms and (not self.cursor or m.commit_log_offset < below)
        ]
        return hits[: self.cap], self.cursor


def spread(count: int, per_second: int, key: str = "K") -> list[MessageExt]:
    """`count` records, `per_second` of them in each second."""
    return [
        record(100 * i, FILE_BEGIN_MS + (i // per_second) * 1000 + i % per_second, key)
        for i in range(count)
    ]


def wanted(message: MessageExt) -> bool:
    return "K" in message.keys


async def search(broker: ModelBroker, max_num: int) -> KeyQueryResult:
    return await search_pages(broker.page, wanted, max_num, 2**63 - 1)


@pytest.mark.parametrize("cursor", [True, False])
async def test_every_match_is_found_across_pages(cursor: bool) -> None:
    broker = ModelBroker(spread(300, per_second=10), cursor)
    found = await search(broker, 1000)
    assert [m.commit_log_offset for m in found.messages] == [100 * i for i in range(300)]
    assert (found.cut, found.incomplete) == (False, False)
    assert broker.requests > 300 // 64


async def test_a_burst_within_one_second_is_paged_with_the_cursor() -> None:
    broker = ModelBroker(spread(500, per_second=500), cursor=True)
    found = await search(broker, 1000)
    assert len(found.messages) == 500
    assert not found.incomplete


async def test_without_a_cursor_a_burst_beyond_a_page_is_reported_incomplete() -> None:
    broker = ModelBroker(spread(150, per_second=150), cursor=False)
    found = await search(broker, 1000)
    assert len(found.messages) == 64  # the newest page: the rest shares its second
    assert found.incomplete
    assert not found.cut


@pytest.mark.parametrize("cursor", [True, False])
async def test_more_than_max_is_cut_to_the_newest(cursor: bool) -> None:
    broker = ModelBroker(spread(200, per_second=7), cursor)
    found = await search(broker, 50)
    assert found.cut
    assert [m.commit_log_offset for m in found.messages] == [100 * i for i in range(150, 200)]


async def test_exactly_max_is_not_cut() -> None:
    found = await search(ModelBroker(spread(50, per_second=3), cursor=True), 50)
    assert (len(found.messages), found.cut) == (50, False)


async def test_other_keys_sharing_the_hash_are_paged_over_not_counted() -> None:
    records = [
        record(10 * i, FILE_BEGIN_MS + i * 300, "K" if i % 3 == 0 else "collides")
        for i in range(400)
    ]
    found = await search(ModelBroker(records, cursor=False), 1000)
    assert len(found.messages) == len([i for i in range(400) if i % 3 == 0])
    assert all("K" in m.keys for m in found.messages)


async def test_nothing_found() -> None:
    found = await search(ModelBroker([], cursor=True), 10)
    assert found == KeyQueryResult([], cut=False, incomplete=False)


def test_merge_keeps_the_newest_of_all_brokers() -> None:
    a = KeyQueryResult([record(1, 10, host="a:1"), record(2, 30, host="a:1")], cut=False)
    b = KeyQueryResult([record(1, 20, host="b:1")], cut=False, incomplete=True)
    merged = merge([a, b], 2)
    assert [m.store_timestamp for m in merged.messages] == [20, 30]
    assert (merged.cut, merged.incomplete) == (True, True)


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 300),
    per_second=st.integers(1, 40),
    max_num=st.integers(1, 400),
    cursor=st.booleans(),
)
async def test_found_is_always_the_newest_matches(
    count: int, per_second: int, max_num: int, cursor: bool
) -> None:
    records = spread(count, per_second)
    found = await search(ModelBroker(records, cursor), max_num)
    expected = [m.commit_log_offset for m in records][-max_num:]
    assert found.cut == (count > max_num)
    assert [m.commit_log_offset for m in found.messages] == expected
