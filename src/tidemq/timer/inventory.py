"""Which timers are still parked: the timer files read back, for people (the dashboard).

Pure: given the units of every timer file, the delivery watermark and what
is known to be recalled, the NORMAL units still waiting, in delivery order.
A unit is waiting when it is after the watermark (not delivered), no RECALL
unit or pending recall names its key, it was not delivered before the last
start (the recovery scan's set), and it is the first unit seen for its
source offset (a re-enqueue after a crash writes a second one). Messages
parked but not enqueued into a timer file yet (the service's enqueue lag)
are not in the files, so not here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from tidemq.timer.buckets import Unit, UnitKind

__all__ = ["MAX_LISTED_UNITS", "waiting_units"]

MAX_LISTED_UNITS = 200_000
"""Units read at most for one listing (8 MB of timer files)."""


def waiting_units(
    files: Iterable[list[Unit]],
    watermark: tuple[int, int],
    recalled: Collection[int] = (),
    delivered: Collection[int] = (),
    limit: int = MAX_LISTED_UNITS,
) -> tuple[list[Unit], bool]:
    """The waiting NORMAL units, by (eff_ms, source offset); and whether the
    listing stopped at `limit` units read."""
    normal: list[Unit] = []
    recall_keys = set(recalled)
    read = 0
    cut = False
    for units in files:
        for unit in units:
            read += 1
            if read > limit:
                cut = True
                break
            if unit.kind is UnitKind.RECALL:
                recall_keys.add(unit.key_hash)
            else:
                normal.append(unit)
        if cut:
            break
    seen: set[int] = set()
    waiting: list[Unit] = []
    for unit in sorted(normal, key=lambda u: (u.eff_ms, u.source_offset)):
        source = unit.source_offset
        if (unit.eff_ms, source) <= watermark or source in seen or source in delivered:
            continue
        if unit.key_hash and unit.key_hash in recall_keys:
            continue
        seen.add(source)
        waiting.append(unit)
    return waiting, cut
