"""One suite, two stores: the file store must behave as the in-memory model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.record.codec import decode_record, decode_records
from tidemq.store.api import DispatchRequest, GetStatus, PutStatus
from tidemq.store.config import SCHEDULE_TOPIC, parse_delay_levels
from tidemq.store.file_store import FileMessageStore
from tidemq.store.filters import TagFilter
from tidemq.store.memory import MemoryMessageStore
from tidemq.testing.stores import make_message, small_config

Store = FileMessageStore | MemoryMessageStore


def put_all(store: Store, messages: list) -> list:  # type: ignore[type-arg]
    result = store.put_messages_blocking(messages)
    assert result.ok, result.remark
    return list(result.results)


def test_put_then_read_returns_the_stored_records(store: Store) -> None:
    sent = [make_message("T", f"body-{i}", tags="TagA", keys=f"k{i}") for i in range(10)]
    results = put_all(store, sent)
    assert [r.queue_offset for r in results] == list(range(10))

    got = store.get_messages("g", "T", 0, 0, 32)

    assert got.status is GetStatus.FOUND
    assert got.next_begin_offset == 10
    assert got.queue_offsets == list(range(10))
    assert (got.min_offset, got.max_offset) == (0, 10)
    messages = decode_records(got.body())
    assert [m.body for m in messages] == [f"body-{i}".encode() for i in range(10)]
    assert [m.queue_offset for m in messages] == list(range(10))
    assert [m.msg_id for m in messages] == [r.msg_id for r in results]
    assert [m.commit_log_offset for m in messages] == got.physical_offsets
    assert all(m.properties[props.TAGS] == "TagA" for m in messages)


def test_read_statuses_follow_rocketmq(store: Store) -> None:
    put_all(store, [make_message("T", "x") for _ in range(3)])

    unknown = store.get_messages("g", "T", 1, 0, 32)
    at_end = store.get_messages("g", "T", 0, 3, 32)
    beyond = store.get_messages("g", "T", 0, 9, 32)

    assert unknown.status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert (at_end.status, at_end.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    assert (beyond.status, beyond.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)


def test_pages_of_32_walk_the_whole_queue(store: Store) -> None:
    put_all(store, [make_message("T", bytes(1024)) for _ in range(100)])
    offset, sizes = 0, []
    while True:
        got = store.get_messages("g", "T", 0, offset, 32)
        if got.status is not GetStatus.FOUND:
            break
        sizes.append(got.message_count)
        offset = got.next_begin_offset
    assert sizes == [32, 32, 32, 4]
    assert offset == 100


def test_tag_filter_skips_other_tags_and_still_advances(store: Store) -> None:
    tags = ["TagA", "TagB", None, "TagC"] * 5
    put_all(store, [make_message("T", f"m{i}", tags=t) for i, t in enumerate(tags)])

    got = store.get_messages("g", "T", 0, 0, 32, TagFilter.from_expression("TagA || TagC"))
    none = store.get_messages("g", "T", 0, 1, 1, TagFilter.from_expression("TagZ"))

    assert [m.properties.get(props.TAGS) for m in decode_records(got.body())] == [
        "TagA",
        "TagC",
    ] * 5
    assert got.next_begin_offset == 20
    assert none.status is GetStatus.NO_MATCHED_MESSAGE
    assert none.next_begin_offset == 20


def test_property_filter_sees_record_properties(store: Store) -> None:
    put_all(store, [make_message("T", "x", properties={"n": str(i)}) for i in range(10)])
    even = TagFilter(predicate=lambda p: int(p.get("n", "1")) % 2 == 0)

    got = store.get_messages("g", "T", 0, 0, 32, even)

    assert [m.properties["n"] for m in decode_records(got.body())] == ["0", "2", "4", "6", "8"]


def test_byte_budget_bounds_a_page_but_returns_at_least_one(store: Store) -> None:
    put_all(store, [make_message("T", bytes(4000)) for _ in range(10)])

    page = store.get_messages("g", "T", 0, 0, 32, max_bytes=10_000)
    tiny = store.get_messages("g", "T", 0, 0, 32, max_bytes=10)

    assert page.message_count == 2
    assert page.next_begin_offset == 2
    assert tiny.message_count == 1


def test_batch_gets_consecutive_offsets_and_is_all_or_nothing(store: Store) -> None:
    results = put_all(store, [make_message("T", f"b{i}") for i in range(5)])
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]

    bad = [make_message("T", "ok"), make_message("T", bytes(store.config.max_message_size + 1))]
    rejected = store.put_messages_blocking(bad)

    assert rejected.status is PutStatus.MESSAGE_ILLEGAL
    assert "message 1 of the batch" in rejected.remark
    assert store.max_offset("T", 0) == 5


def test_oversized_body_is_refused_with_a_readable_reason(store: Store) -> None:
    limit = store.config.max_message_size
    result = store.put_messages_blocking([make_message("T", bytes(limit + 1))])
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert str(limit) in result.remark
    assert store.max_offset("T", 0) == 0


def test_query_by_key_unique_key_and_time(store: Store, clock: ManualClock) -> None:
    first = put_all(store, [make_message("T", "a", keys="order-1 user-9", unique_key="U1")])
    clock.advance(10)
    put_all(store, [make_message("T", "b", keys="order-2", unique_key="U2")])
    put_all(store, [make_message("Other", "c", keys="order-1")])

    by_key = store.query_by_key("T", "order-1", 10)
    by_second_key = store.query_by_key("T", "user-9", 10)
    by_unique = store.query_by_unique_key("T", "U2")
    too_late = store.query_by_key("T", "order-1", 10, begin_ms=clock.now_ms())

    assert by_key.physical_offsets == [first[0].physical_offset]
    assert by_second_key.physical_offsets == [first[0].physical_offset]
    assert [decode_record(b)[0].body for b in by_unique.buffers] == [b"b"]
    assert too_late.physical_offsets == []


def test_query_by_key_pages_below_a_commit_log_offset(store: Store) -> None:
    offsets = [
        r.physical_offset
        for r in put_all(store, [make_message("T", f"m{i}", keys="K") for i in range(10)])
    ]

    first = store.query_by_key("T", "K", 4)
    second = store.query_by_key("T", "K", 4, below_offset=min(first.physical_offsets))
    rest = store.query_by_key("T", "K", 4, below_offset=min(second.physical_offsets))
    done = store.query_by_key("T", "K", 4, below_offset=min(rest.physical_offsets))

    newest_first = offsets[::-1]
    assert first.physical_offsets == newest_first[:4]
    assert second.physical_offsets == newest_first[4:8]
    assert rest.physical_offsets == newest_first[8:]
    assert done.physical_offsets == []


def test_time_lookups(store: Store, clock: ManualClock) -> None:
    start = clock.now_ms()
    for i in range(5):
        put_all(store, [make_message("T", f"t{i}")])
        clock.advance(1)

    assert store.offset_by_time("T", 0, start - 1) == 0
    assert store.offset_by_time("T", 0, start + 2500) == 3
    assert store.offset_by_time("T", 0, start + 99_000) == 5
    assert store.store_time("T", 0, 2) == start + 2000
    assert store.store_time("T", 0, 7) == -1
    assert store.earliest_message_time() == start
    window = store.query_by_time("T", start + 1000, start + 3000, 10)
    assert [decode_record(b)[0].body for b in window.buffers] == [b"t1", b"t2", b"t3"]


def test_read_by_physical_offset_and_queue_bounds(store: Store) -> None:
    results = put_all(
        store, [make_message("T", "x", queue_id=3), make_message("T", "y", queue_id=3)]
    )

    record = store.read_by_physical_offset(results[1].physical_offset)

    assert record is not None
    assert decode_record(record)[0].body == b"y"
    assert store.read_by_physical_offset(results[1].physical_offset + 1) is None
    assert (store.min_offset("T", 3), store.max_offset("T", 3)) == (0, 2)
    assert store.queues() == {"T": [3]}


def test_arrival_listener_sees_each_dispatch(store: Store) -> None:
    seen: list[DispatchRequest] = []
    store.add_arrival_listener(seen.append)

    put_all(store, [make_message("T", "x", queue_id=1, tags="TagA", keys="k")])

    assert [(r.topic, r.queue_id, r.queue_offset, r.keys) for r in seen] == [("T", 1, 0, "k")]


def test_prepared_transaction_messages_stay_out_of_queues(store: Store) -> None:
    put_all(store, [make_message("T", "half", sys_flag=sysflag.TRANSACTION_PREPARED_TYPE)])
    assert store.max_offset("T", 0) == 0


def test_delay_topic_tag_slot_holds_the_delivery_time(store: Store, clock: ManualClock) -> None:
    seen: list[DispatchRequest] = []
    store.add_arrival_listener(seen.append)
    put_all(store, [make_message(SCHEDULE_TOPIC, "d", queue_id=1, properties={"DELAY": "2"})])
    assert seen[0].tags_code == clock.now_ms() + parse_delay_levels(store.config.delay_levels)[1]


def test_delete_topics_forgets_their_queues(store: Store) -> None:
    put_all(store, [make_message("Gone", "x"), make_message("Kept", "y")])
    store.delete_topics(["Gone"])
    assert store.queues() == {"Kept": [0]}
    assert store.get_messages("g", "Gone", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE


operations = st.lists(
    st.tuples(
        st.sampled_from(["A", "B", "%RETRY%g"]),
        st.integers(0, 2),
        st.sampled_from([None, "TagA", "TagB"]),
        st.binary(max_size=3000),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations, st.sampled_from([None, "TagA", "TagA || TagB"]), st.integers(1, 40))
def test_file_store_matches_the_model(ops: list, expression: str | None, page: int) -> None:  # type: ignore[type-arg]
    clock = ManualClock()
    with tempfile.TemporaryDirectory() as tmp:
        config = small_config(Path(tmp) / "s", commitlog_file_size=64 * 1024, max_message_size=8192)
        real = FileMessageStore(config, clock=clock)
        model = MemoryMessageStore(config, clock=clock)
        real.open()
        try:
            for topic, queue_id, tags, body, count in ops:
                batch = [make_message(topic, body, queue_id=queue_id, tags=tags)] * count
                assert [r.queue_offset for r in real.put_messages_blocking(batch).results] == [
                    r.queue_offset for r in model.put_messages_blocking(batch).results
                ]
                clock.advance(0.001)
            assert real.queues() == model.queues()
            message_filter = TagFilter.from_expression(expression)
            for topic, queue_ids in model.queues().items():
                for queue_id in queue_ids:
                    offset = 0
                    while True:
                        a = real.get_messages("g", topic, queue_id, offset, page, message_filter)
                        b = model.get_messages("g", topic, queue_id, offset, page, message_filter)
                        assert (a.status, a.next_begin_offset, a.queue_offsets) == (
                            b.status,
                            b.next_begin_offset,
                            b.queue_offsets,
                        )
                        assert [m.body for m in decode_records(a.body())] == [
                            m.body for m in decode_records(b.body())
                        ]
                        if a.next_begin_offset == offset:
                            break
                        offset = a.next_begin_offset
        finally:
            real.close()
