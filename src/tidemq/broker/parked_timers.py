"""The timer messages a broker holds, as people look at them (the dashboard's
Timers page): due times of all, details and recall handles of the first few.

Details come from the parked record itself (read at the unit's source
offset): the real topic, the client id (UNIQ_KEY), the delivery time asked
for (TIMER_OUT_MS) and when it was parked. The recall handle is the one the
send result carried (RecallHandle of topic, this broker, delivery time,
client id), so a recall from here is the producer's recall.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.broker.timers import BrokerTimers
from tidemq.common import properties as props
from tidemq.common.recall_handle import RecallHandle, RecallHandleError
from tidemq.protocol.errors import ProtocolError
from tidemq.record.codec import decode_record

__all__ = ["ParkedTimer", "ParkedTimers", "parked_timers"]


@dataclass(frozen=True, slots=True)
class ParkedTimer:
    topic: str
    msg_id: str
    """The client id (UNIQ_KEY); "" when the producer gave none."""
    deliver_ms: int
    parked_ms: int
    body_size: int
    recall_handle: str | None


@dataclass(frozen=True, slots=True)
class ParkedTimers:
    due_ms: list[int]
    """The delivery time of every waiting timer, earliest first."""
    first: list[ParkedTimer]
    """Details of the earliest `limit`."""
    cut: bool
    """The timer files held more than one listing reads."""
    not_enqueued: int
    """Parked but not in a timer file yet (counted in none of the above)."""


def _details(timers: BrokerTimers, source_offset: int, eff_ms: int) -> ParkedTimer | None:
    raw = timers.store.read_by_physical_offset(source_offset)
    if raw is None:
        return None
    try:
        record, _ = decode_record(bytes(raw))
    except ProtocolError:
        return None
    properties = record.properties
    topic = properties.get(props.REAL_TOPIC, record.topic)
    unique_key = properties.get(props.UNIQ_KEY, "")
    try:
        deliver_ms = int(properties.get(props.TIMER_OUT_MS, ""))
    except ValueError:
        deliver_ms = eff_ms
    handle: str | None = None
    if unique_key:
        try:
            handle = RecallHandle(topic, timers.config.broker_name, deliver_ms, unique_key).encode()
        except RecallHandleError:
            handle = None
    return ParkedTimer(
        topic, unique_key, deliver_ms, record.store_timestamp, len(record.body), handle
    )


def parked_timers(timers: BrokerTimers, limit: int = 100) -> ParkedTimers:
    """What `timers` holds now (see the module docstring)."""
    units, cut = timers.engine.waiting()
    first = []
    for unit in units[:limit]:
        details = _details(timers, unit.source_offset, unit.eff_ms)
        if details is not None:
            first.append(details)
    lag = int(timers.engine.stats().get("enqueue_lag", 0))
    return ParkedTimers([u.eff_ms for u in units], first, cut, lag)
