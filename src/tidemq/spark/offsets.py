"""Offsets of a tidemq read as Spark sees them: pure values, no I/O.

A position is ``{topic: {"<broker>:<queueId>": offset}}``, the same shape as
Spark's Kafka source uses (``{"topic": {"0": 23}}``) with the broker name in
the key, since a RocketMQ topic's queues live on several brokers. Offsets
are consumequeue offsets: the next message to read. In ``startingOffsets``
JSON, ``-2`` means the queue's earliest offset and ``-1`` its latest, as in
Kafka. :func:`canonical` is the one text form Spark checkpoints, so that a
restarted query replays exactly the range it logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from tidemq.common.message import MessageQueue

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "Position",
    "canonical",
    "limit_ranges",
    "parse_position",
    "plan_ranges",
    "position_of",
    "queue_key",
    "queue_of",
    "to_spark",
]

EARLIEST = -2
LATEST = -1

Position = dict[MessageQueue, int]


def queue_key(mq: MessageQueue) -> str:
    return f"{mq.broker_name}:{mq.queue_id}"


def queue_of(topic: str, key: str) -> MessageQueue:
    """The queue a position key names; ValueError for anything but "<broker>:<queueId>"."""
    broker, sep, queue = key.rpartition(":")
    if not sep or not broker or not queue.isdigit():
        raise ValueError(f"queue key {key!r} of topic {topic} is not '<broker>:<queueId>'")
    return MessageQueue(topic, broker, int(queue))


def to_spark(position: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """The JSON-ready dict Spark keeps in its offset log (sorted, so stable)."""
    out: dict[str, dict[str, int]] = {}
    for mq in sorted(position):
        out.setdefault(mq.topic, {})[queue_key(mq)] = int(position[mq])
    return out


def canonical(position: Mapping[MessageQueue, int]) -> str:
    return json.dumps(to_spark(position), sort_keys=True, separators=(",", ":"))


def position_of(document: object, *, allow_special: bool = False) -> Position:
    """A position from Spark's dict (or parsed JSON); ValueError when malformed.

    With `allow_special`, EARLIEST and LATEST are accepted as offsets."""
    if not isinstance(document, Mapping):
        raise ValueError(f"offsets must be a JSON object of topics, not {document!r}")
    position: Position = {}
    lowest = EARLIEST if allow_special else 0
    for topic, queues in document.items():
        if not isinstance(topic, str) or not isinstance(queues, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object of queue offsets")
        for key, offset in queues.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest:
                raise ValueError(
                    f"offset {offset!r} of {topic} {key} must be an integer >= {lowest}"
                )
            position[queue_of(topic, str(key))] = offset
    return position


def parse_position(text: str, *, allow_special: bool = True) -> Position:
    """`startingOffsets`/`endingOffsets` JSON text as a position."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"offsets are not valid JSON ({exc.msg} at {exc.pos})") from None
    return position_of(document, allow_special=allow_special)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Messages [start, end) of one queue: one Spark input partition."""

    queue: MessageQueue
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(
    start: Mapping[MessageQueue, int],
    end: Mapping[MessageQueue, int],
) -> list[OffsetRange]:
    """One range per queue of `end` with something to read, in queue order.

    A queue missing from `start` appeared after the query began: it is read
    from its start, offset 0."""
    ranges = []
    for mq in sorted(end):
        begin = start.get(mq, 0)
        if end[mq] > begin:
            ranges.append(OffsetRange(mq, begin, end[mq]))
    return ranges


def limit_ranges(
    start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_messages: int
) -> Position:
    """The end position that reads at most `max_messages` from `start` towards `latest`.

    Shares the budget over the queues in proportion to what each has
    waiting (Kafka's rate limit), rounding down but giving every queue with
    a backlog at least one message while budget remains, so a trigger always
    makes progress; queues never move backwards and never pass `latest`."""
    if max_messages <= 0:
        raise ValueError(f"maxMessagesPerTrigger must be positive, not {max_messages}")
    backlog = {mq: max(0, latest[mq] - start.get(mq, 0)) for mq in latest}
    total = sum(backlog.values())
    end: Position = {**start, **{mq: start.get(mq, 0) for mq in latest}}
    if total <= max_messages:
        return {**end, **{mq: start.get(mq, 0) + n for mq, n in backlog.items()}}
    budget = max_messages
    waiting = sorted(mq for mq, n in backlog.items() if n > 0)
    if budget >= len(waiting):  # one each first: every queue with a backlog moves
        for mq in waiting:
            end[mq] += 1
            backlog[mq] -= 1
        budget -= len(waiting)
        total -= len(waiting)
    for mq in waiting:
        take = min(backlog[mq] * budget // total if total else 0, backlog[mq])
        end[mq] += take
        backlog[mq] -= take
    budget = max_messages - sum(end[mq] - start.get(mq, 0) for mq in waiting)
    for mq in waiting:  # what rounding down left over
        if budget == 0:
            break
        if backlog[mq] > 0:
            end[mq] += 1
            backlog[mq] -= 1
            budget -= 1
    return end
