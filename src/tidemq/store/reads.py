"""The pull-status rule both stores share: where an offset stands in a queue."""

from __future__ import annotations

from tidemq.store.api import GetResult, GetStatus


def classify_offset(offset: int, min_offset: int, max_offset: int) -> GetResult | None:
    """A finished result when `offset` cannot be read, else None (go read).

    Mirrors RocketMQ's DefaultMessageStore.getMessage on a master: an empty
    queue answers NO_MESSAGE_IN_QUEUE; below the min, OFFSET_TOO_SMALL with
    the min as next offset; at the max, OFFSET_OVERFLOW_ONE (the long-poll
    case); beyond it, OFFSET_OVERFLOW_BADLY with the max as next offset.
    """
    if max_offset == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    if offset < min_offset:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if offset == max_offset:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
    if offset > max_offset:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
    return None
