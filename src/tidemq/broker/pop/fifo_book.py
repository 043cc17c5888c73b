"""FIFO delivery state per group and queue (seed 004, ConsumerOrderInfoManager).

For an order-enabled group the broker remembers the batch it last delivered
from each queue: the offsets (delta encoded: the first absolute, the rest
relative to it), how often that same batch was delivered, when, for how long
it is invisible, and a bitmap of the acked ones. While that batch is within
its invisible time and not all acked the queue is blocked: no other receive
gets a later message, which is what keeps a message group in order. The last
ack commits the offset. Persisted as `config/consumerOrderInfo.json` in
Java's shape.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidemq.common.atomic_file import write_json_atomically
from tidemq.common.clock import Clock

log = logging.getLogger(__name__)

SEPARATOR = "@"
NOT_IN_BATCH = -1
NOT_DONE = -2
STALE = -3
"""The ack names an earlier delivery of the batch (its pop time is not the batch's)."""


def delta_encode(offsets: list[int]) -> list[int]:
    """[first, o1 - first, o2 - first, ...] (Java's OrderInfo.simpleO)."""
    if not offsets:
        return []
    first = offsets[0]
    return [first] + [o - first for o in offsets[1:]]


def delta_decode(encoded: list[int]) -> list[int]:
    if not encoded:
        return []
    first = encoded[0]
    return [first] + [first + d for d in encoded[1:]]


@dataclass(slots=True)
class OrderInfo:
    offsets: list[int]
    """Delta encoded."""
    consumed_count: int
    pop_ms: int
    invisible_ms: int
    commit_bits: int = 0

    def absolute(self) -> list[int]:
        return delta_decode(self.offsets)

    def done(self) -> bool:
        full = (1 << len(self.offsets)) - 1
        return self.commit_bits & full == full

    def blocks(self, now_ms: int) -> bool:
        return now_ms < self.pop_ms + self.invisible_ms and not self.done()

    def to_json(self) -> dict[str, Any]:
        return {
            "o": self.offsets,
            "cm": self.commit_bits,
            "i": self.invisible_ms,
            "l": self.pop_ms,
            "popTime": self.pop_ms,
            "c": self.consumed_count,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> OrderInfo:
        offsets = [int(x) for x in raw["o"]]
        return cls(
            offsets,
            int(raw.get("c", 0)),
            int(raw.get("popTime", raw.get("l", 0))),
            int(raw.get("i", 0)),
            int(raw.get("cm", 0)),
        )


class FifoBook:
    """Every group's last FIFO batch per queue; `path` is consumerOrderInfo.json."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path = path
        self.clock = clock
        self._table: dict[str, dict[int, OrderInfo]] = {}
        self.dirty = False

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text())
            table = raw["table"]
            self._table = {
                key: {int(qid): OrderInfo.from_json(info) for qid, info in queues.items()}
                for key, queues in table.items()
            }
        except FileNotFoundError:
            self._table = {}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("%s is unreadable (%s); starting with no FIFO state", self.path, exc)
            self._table = {}

    def snapshot(self) -> dict[str, Any]:
        return {
            "table": {
                key: {str(qid): info.to_json() for qid, info in queues.items()}
                for key, queues in self._table.items()
                if queues
            }
        }

    def persist(self) -> None:
        write_json_atomically(self.path, self.snapshot())
        self.dirty = False

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self._table.get(topic + SEPARATOR + group, {}).get(queue_id)

    def check_block(self, topic: str, group: str, queue_id: int) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and info.blocks(self.clock.now_ms())

    def update(
        self,
        topic: str,
        group: str,
        queue_id: int,
        offsets: list[int],
        pop_ms: int,
        invisible_ms: int,
    ) -> int:
        """Record the batch just delivered; how often it was delivered before."""
        encoded = delta_encode(offsets)
        queues = self._table.setdefault(topic + SEPARATOR + group, {})
        old = queues.get(queue_id)
        count = 0
        if old is not None and old.offsets and encoded and old.offsets[0] == encoded[0]:
            count = old.consumed_count + 1 if old.offsets == encoded else 0
        queues[queue_id] = OrderInfo(encoded, count, pop_ms, invisible_ms)
        self.dirty = True
        return count

    def commit_and_next(
        self, topic: str, group: str, queue_id: int, offset: int, pop_ms: int
    ) -> int:
        """Mark `offset` of the delivery at `pop_ms` acked: NOT_IN_BATCH, STALE
        (delivered again since: nothing marked), NOT_DONE, or the offset to
        commit (ConsumerOrderInfoManager.commitAndNext,
        ConsumerOrderInfoManager.java:178-226; no invisible-time check)."""
        info = self.get(topic, group, queue_id)
        if info is None or not info.offsets:
            return NOT_IN_BATCH
        if pop_ms != info.pop_ms:
            return STALE
        absolute = info.absolute()
        try:
            index = absolute.index(offset)
        except ValueError:
            return NOT_IN_BATCH
        info.commit_bits |= 1 << index
        self.dirty = True
        if info.done():
            return max(absolute) + 1
        return NOT_DONE

    def is_acked(self, topic: str, group: str, queue_id: int, offset: int) -> bool:
        info = self.get(topic, group, queue_id)
        if info is None:
            return False
        absolute = info.absolute()
        return offset in absolute and bool(info.commit_bits & (1 << absolute.index(offset)))

    def change_invisible(
        self, topic: str, group: str, queue_id: int, offset: int, now_ms: int, invisible_ms: int
    ) -> bool:
        """Make the batch invisible until `now_ms + invisible_ms`. Its pop time
        stays, so the handles of this delivery keep acking it (Java keeps it
        too: ChangeInvisibleTimeProcessor.java:225-253)."""
        info = self.get(topic, group, queue_id)
        if info is None or offset not in info.absolute():
            return False
        info.invisible_ms = now_ms + invisible_ms - info.pop_ms
        self.dirty = True
        return True

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        queues = self._table.get(topic + SEPARATOR + group)
        if queues is not None and queues.pop(queue_id, None) is not None:
            self.dirty = True
