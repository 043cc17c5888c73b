"""The in-memory timing wheel: only the loaded window of timers (pure).

Slots are `precision_ms` wide and keyed by slot number (eff_ms // precision),
so a slot never wraps: the wheel only ever holds the buckets the service has
loaded (the current one and the next), and its memory is proportional to the
timers due in that window, never to the timers waiting further ahead.

An entry is a tuple (eff_ms, source_offset, log_position, key_hash): its order
is the delivery order. `pop_due(now)` returns every entry with eff_ms <= now,
in that order, each once, skipping entries recalled by key hash. A recall mark
is kept until the wheel has popped past its time: a recall marker is always
enqueued after its target, so the target's time is at or before the marker's.
"""

from __future__ import annotations

import bisect
import heapq
from typing import NamedTuple


class WheelEntry(NamedTuple):
    eff_ms: int
    source_offset: int
    log_position: int
    key_hash: int


_AFTER_ALL = 1 << 63


class TimerWheel:
    def __init__(self, precision_ms: int) -> None:
        if precision_ms < 1:
            raise ValueError("the wheel precision must be at least 1 ms")
        self.precision_ms = precision_ms
        self._slots: dict[int, list[WheelEntry]] = {}
        self._unsorted: set[int] = set()
        self._heap: list[int] = []
        self._recalled: dict[int, int] = {}
        self._size = 0
        self.skipped_recalled = 0
        """How many entries pop_due dropped because they were recalled."""

    def __len__(self) -> int:
        """Entries held, recalled ones not yet dropped included."""
        return self._size

    @property
    def recall_marks(self) -> int:
        return len(self._recalled)

    def add(self, entry: WheelEntry) -> None:
        slot_no = entry.eff_ms // self.precision_ms
        slot = self._slots.get(slot_no)
        if slot is None:
            self._slots[slot_no] = [entry]
            heapq.heappush(self._heap, slot_no)
        else:
            if entry < slot[-1]:
                self._unsorted.add(slot_no)
            slot.append(entry)
        self._size += 1

    def recall(self, key_hash: int, until_ms: int) -> None:
        """Drop entries with `key_hash` when popped, until the wheel pops past `until_ms`."""
        if key_hash == 0:
            return
        previous = self._recalled.get(key_hash)
        if previous is None or previous < until_ms:
            self._recalled[key_hash] = until_ms

    def is_recalled(self, key_hash: int) -> bool:
        return key_hash != 0 and key_hash in self._recalled

    def next_due_ms(self) -> int | None:
        """The earliest eff_ms held (recalled entries included), None when empty."""
        if not self._heap:
            return None
        slot_no = self._heap[0]
        slot = self._slots[slot_no]
        if slot_no in self._unsorted:
            return min(slot)[0]
        return slot[0][0]

    def count_due(self, now_ms: int) -> int:
        """Entries due at `now_ms` and not popped yet (recalled ones included)."""
        last = now_ms // self.precision_ms
        due = 0
        for slot_no, slot in self._slots.items():
            if slot_no < last:
                due += len(slot)
            elif slot_no == last:
                due += sum(1 for entry in slot if entry.eff_ms <= now_ms)
        return due

    def pop_due(self, now_ms: int, limit: int | None = None) -> list[WheelEntry]:
        """Entries due at `now_ms` in delivery order, at most `limit` of them
        (recalled ones dropped and not counted)."""
        out: list[WheelEntry] = []
        budget = _AFTER_ALL if limit is None else limit
        heap, slots, precision = self._heap, self._slots, self.precision_ms
        while heap and len(out) < budget and heap[0] * precision <= now_ms:
            slot_no = heap[0]
            slot = slots[slot_no]
            if slot_no in self._unsorted:
                slot.sort()
                self._unsorted.discard(slot_no)
            cut = bisect.bisect_right(slot, (now_ms, _AFTER_ALL))
            taken = 0
            for entry in slot[:cut]:
                if len(out) >= budget:
                    break
                taken += 1
                if entry.key_hash and entry.key_hash in self._recalled:
                    self.skipped_recalled += 1
                    continue
                out.append(entry)
            self._size -= taken
            if taken == len(slot):
                heapq.heappop(heap)
                del slots[slot_no]
            else:
                del slot[:taken]
                break
        if out:
            self._forget_recalls_before(out[-1].eff_ms)
        return out

    def _forget_recalls_before(self, frontier_ms: int) -> None:
        if not self._recalled:
            return
        stale = [key for key, until in self._recalled.items() if until < frontier_ms]
        for key in stale:
            del self._recalled[key]
