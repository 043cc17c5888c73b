"""What an append reserves before writing: enough for every entry it writes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock
from tidemq.store.api import DispatchRequest
from tidemq.store.fs import FaultyFileSystem
from tidemq.store.index import IndexService
from tidemq.store.room import index_entries_bound, queue_spans

keys = st.lists(st.sampled_from(["a", "b", "c", "", "long-key"]), max_size=4).map(" ".join)


@st.composite
def appends(draw: st.DrawFn) -> list[DispatchRequest]:
    """Dispatch requests as one append makes them: offsets grow per queue."""
    next_offset: dict[tuple[str, int], int] = {}
    requests = []
    for position in range(draw(st.integers(1, 40))):
        key = (draw(st.sampled_from(["T", "U"])), draw(st.integers(0, 3)))
        offset = next_offset.setdefault(key, draw(st.integers(0, 1000)))
        next_offset[key] = offset + 1
        unique = draw(st.one_of(st.none(), st.just(f"U{position:020d}")))
        requests.append(
            DispatchRequest(key[0], key[1], position * 100, 100, 0, 0, offset, draw(keys), unique)
        )
    return requests


@given(appends())
def test_spans_cover_exactly_the_offsets_written(requests: list[DispatchRequest]) -> None:
    spans = queue_spans(requests)
    for request in requests:
        first, end = spans[(request.topic, request.queue_id)]
        assert first <= request.queue_offset < end
    written = {(r.topic, r.queue_id) for r in requests}
    assert set(spans) == written
    for key, (first, end) in spans.items():
        assert end - first == sum(1 for r in requests if (r.topic, r.queue_id) == key)


@given(appends())
def test_the_index_bound_is_never_below_what_the_index_writes(
    requests: list[DispatchRequest],
) -> None:
    index = IndexService(Path("/nonexistent"), FaultyFileSystem(0), ManualClock())
    needed = sum(len(index._key_hashes(request)) for request in requests)
    assert index_entries_bound(requests) >= needed
