"""Where a search of the commitlog for records stored after some time may begin.

Store times rise along the commitlog (each put stamps the broker's clock as it
appends), so a record stored before time T marks a position before which
nothing stored at or after T lies. The latest such record over every consume
queue, found by each queue's search by time, is that position: a promoted
replica's search for its old master's timer deliveries starts there instead of
at a parked message that may be weeks old.
"""

from __future__ import annotations

from tidemq.store.api import MessageStore

__all__ = ["commitlog_floor"]


def commitlog_floor(store: MessageStore, timestamp_ms: int) -> int:
    """A commitlog offset at or after which every record stored at or after
    `timestamp_ms` lies; 0 when no queue holds a record stored before then."""
    floor = 0
    for topic, queue_ids in store.queues().items():
        for queue_id in queue_ids:
            first_at_or_after = store.offset_by_time(topic, queue_id, timestamp_ms)
            if first_at_or_after <= store.min_offset(topic, queue_id):
                continue
            physical = store.physical_offset(topic, queue_id, first_at_or_after - 1)
            floor = max(floor, physical)
    return floor
