"""Room for an append, made before its first byte is written.

A message is acknowledged only when its commitlog record and its
consumequeue entry are both written. On a full disk the writes that can fail
are the ones needing new blocks, so the store asks for every block the append
will need first, in the commitlog, in each consumequeue it touches and in
the index, and writes nothing if any is missing: the producer gets a refusal
and no record is left behind that a consumer could see later. Reserving is
cheap in the common case: blocks are reserved a chunk ahead, so most appends
find their room already there and make no system call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemq.store.api import DispatchRequest
from tidemq.store.commitlog import AppendPlan, CommitLog
from tidemq.store.consumequeue import ConsumeQueue
from tidemq.store.index import IndexService

QueueKey = tuple[str, int]


def queue_spans(dispatches: Sequence[DispatchRequest]) -> dict[QueueKey, tuple[int, int]]:
    """(first queue offset, one past the last) per queue the dispatches write
    (an append's queue offsets grow within each queue)."""
    first: dict[QueueKey, int] = {}
    last: dict[QueueKey, int] = {}
    for request in dispatches:
        key = (request.topic, request.queue_id)
        if key not in first:
            first[key] = request.queue_offset
        last[key] = request.queue_offset
    return {key: (start, last[key] + 1) for key, start in first.items()}


def index_entries_bound(dispatches: Sequence[DispatchRequest]) -> int:
    """At most how many index entries the dispatches add: one for the unique
    key and one per key (without hashing them; repeats count twice)."""
    total = 0
    for request in dispatches:
        if request.unique_key:
            total += 1
        keys = request.keys
        if keys:
            total += keys.count(" ") + 1
    return total


def reserve_for_append(
    plan: AppendPlan,
    commitlog: CommitLog,
    queue_for: Callable[[str, int], ConsumeQueue],
    index: IndexService | None,
) -> None:
    """Blocks for everything `plan` will write, or NoSpaceError (nothing written)."""
    commitlog.log.reserve(plan.start, plan.end)
    dispatches = plan.dispatches
    if len(dispatches) == 1:  # a single send: no table of spans
        request = dispatches[0]
        offset = request.queue_offset
        queue_for(request.topic, request.queue_id).reserve(offset, offset + 1)
    else:
        for (topic, queue_id), (first, end) in queue_spans(dispatches).items():
            queue_for(topic, queue_id).reserve(first, end)
    if index is not None:
        index.reserve(index_entries_bound(dispatches))
