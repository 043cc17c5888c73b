"""One message's life, read from its trace records (pure: records in, Timeline out).

The records come from the trace messages a key query on the trace topic
returns for the message id (as Java's `mqadmin queryMsgTraceById` and
TraceView.decodeFromTraceTransData read them: only records of that msgId).
What each part of the Timeline is made of:

* sent: each Pub record (normally one; a producer that retried after a
  non-SEND_OK status records more), with the client host: the born host of
  the trace message that carried it (Java's TraceView does the same), or the
  host an old client wrote in the record itself;
* stored: where the broker put it (the Pub's store host and offset msgId),
  completed by the reader with the stored message itself when it can look it
  up (store time, queue, queue offset);
* per consumer group: its deliveries, a SubBefore paired with the SubAfter of
  the same requestId (when, on which client, the retry count, how long, the
  outcome and its ConsumeReturnType), oldest first; the group's status is
  that of its last delivery: consumed, failed (retried later, unless retries
  are used up), in progress (no SubAfter yet), or dead-lettered when the
  reader found the message in the group's %DLQ% topic (RocketMQ's clients
  trace no DLQ send; the broker moves the message there when a failed
  delivery had used up its retries, so the DLQ itself is the evidence);
* transaction ends (EndTransaction) and recalls (Recall).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidemq.client.trace.records import (
    ConsumeReturnType,
    EndTransactionRecord,
    PubRecord,
    RecallRecord,
    SubAfterRecord,
    SubBeforeRecord,
    TraceRecord,
)

__all__ = [
    "CONSUMED",
    "DEAD_LETTERED",
    "FAILED",
    "IN_PROGRESS",
    "CarriedRecord",
    "DeadLetter",
    "Delivery",
    "GroupTrace",
    "RecallStep",
    "SentStep",
    "StoredStep",
    "Timeline",
    "TransactionStep",
    "build_timeline",
]

CONSUMED = "consumed"
FAILED = "failed"
IN_PROGRESS = "in progress"
DEAD_LETTERED = "dead-lettered"


@dataclass(frozen=True, slots=True)
class CarriedRecord:
    """A decoded record and the born host of the trace message that carried it."""

    record: TraceRecord
    born_host: str


@dataclass(frozen=True, slots=True)
class SentStep:
    group: str
    client_host: str
    timestamp_ms: int
    cost_ms: int
    success: bool
    """The broker answered SEND_OK (else a flush or replication status)."""
    topic: str
    tags: str | None
    keys: str | None
    store_host: str
    offset_msg_id: str
    body_length: int
    message_type: str
    """Java's MessageType name: Normal_Msg, Trans_Msg_Half, Delay_Msg, ..."""
    region_id: str


@dataclass(frozen=True, slots=True)
class StoredStep:
    store_host: str
    offset_msg_id: str
    store_timestamp_ms: int | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    """None unless the reader could look the stored message up."""


@dataclass(frozen=True, slots=True)
class Delivery:
    attempt: int
    """1 for the group's first delivery, and so on."""
    request_id: str
    client_host: str
    timestamp_ms: int
    retry_times: int
    """The message's reconsume times at this delivery (0: first delivery)."""
    cost_ms: int | None
    success: bool | None
    """None while no SubAfter record is known (in progress, or its trace was lost)."""
    return_type: str | None
    """The ConsumeReturnType name: SUCCESS, FAILED, EXCEPTION, RETURNNULL, TIME_OUT."""
    region_id: str | None = None
    """The SubBefore's region: the MSG_REGION the broker stamped on the message."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    topic: str
    """%DLQ%<group>."""
    store_timestamp_ms: int
    offset_msg_id: str


@dataclass(frozen=True, slots=True)
class GroupTrace:
    group: str
    deliveries: tuple[Delivery, ...]
    status: str
    """CONSUMED, FAILED, IN_PROGRESS or DEAD_LETTERED."""
    dead_letter: DeadLetter | None = None

    @property
    def retries(self) -> int:
        return max(0, len(self.deliveries) - 1)


@dataclass(frozen=True, slots=True)
class TransactionStep:
    group: str
    client_host: str
    timestamp_ms: int
    state: str
    """COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW."""
    transaction_id: str | None
    from_transaction_check: bool
    store_host: str


@dataclass(frozen=True, slots=True)
class RecallStep:
    group: str
    client_host: str
    timestamp_ms: int
    success: bool


@dataclass(frozen=True, slots=True)
class Timeline:
    msg_id: str
    trace_topic: str
    topic: str | None
    """The traced message's topic (from any record that names it)."""
    sent: tuple[SentStep, ...] = ()
    stored: StoredStep | None = None
    groups: tuple[GroupTrace, ...] = ()
    transactions: tuple[TransactionStep, ...] = ()
    recalls: tuple[RecallStep, ...] = ()
    trace_messages: int = 0
    """Trace messages that held records of this message."""
    skipped: tuple[str, ...] = ()
    """Why records of those trace messages could not be read."""
    notes: tuple[str, ...] = field(default=())
    """What the reader could not find out, and why."""

    @property
    def found(self) -> bool:
        return bool(self.sent or self.groups or self.transactions or self.recalls)

    def group(self, name: str) -> GroupTrace | None:
        return next((g for g in self.groups if g.group == name), None)

    def to_json(self) -> dict[str, Any]:
        """The timeline for programs (`tidemq message trace --json`, the HTTP API)."""
        return {
            "msg_id": self.msg_id,
            "trace_topic": self.trace_topic,
            "topic": self.topic,
            "found": self.found,
            "sent": [_fields(step) for step in self.sent],
            "stored": None if self.stored is None else _fields(self.stored),
            "groups": [
                {
                    "group": g.group,
                    "status": g.status,
                    "retries": g.retries,
                    "deliveries": [_fields(d) for d in g.deliveries],
                    "dead_letter": None if g.dead_letter is None else _fields(g.dead_letter),
                }
                for g in self.groups
            ],
            "transactions": [_fields(step) for step in self.transactions],
            "recalls": [_fields(step) for step in self.recalls],
            "trace_messages": self.trace_messages,
            "skipped": list(self.skipped),
            "notes": list(self.notes),
        }


def _fields(item: Any) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__dataclass_fields__}


def _host(carried: CarriedRecord) -> str:
    record = carried.record
    own = record.client_host if isinstance(record, PubRecord) else None
    return own or carried.born_host


def build_timeline(
    msg_id: str,
    trace_topic: str,
    carried: Iterable[CarriedRecord],
    *,
    trace_messages: int = 0,
    skipped: Sequence[str] = (),
    stored: StoredStep | None = None,
    dead_letters: dict[str, DeadLetter] | None = None,
    notes: Sequence[str] = (),
) -> Timeline:
    """The Timeline of `msg_id` from the records carried by its trace messages
    (records of other messages are ignored); `stored` replaces what the Pub
    records say of the stored message, `dead_letters` maps a group to where
    its DLQ holds the message."""
    mine = [c for c in carried if c.record.msg_id == msg_id]
    sent = tuple(
        sorted(
            (_sent(c) for c in mine if isinstance(c.record, PubRecord)),
            key=lambda s: s.timestamp_ms,
        )
    )
    if stored is None and sent:
        last = sent[-1]
        stored = StoredStep(last.store_host, last.offset_msg_id) if last.offset_msg_id else None
    transactions = tuple(
        sorted(
            (_transaction(c) for c in mine if isinstance(c.record, EndTransactionRecord)),
            key=lambda t: t.timestamp_ms,
        )
    )
    recalls = tuple(
        sorted(
            (
                RecallStep(c.record.group, _host(c), c.record.timestamp_ms, c.record.success)
                for c in mine
                if isinstance(c.record, RecallRecord)
            ),
            key=lambda r: r.timestamp_ms,
        )
    )
    topic = next(
        (
            c.record.topic
            for c in mine
            if isinstance(c.record, PubRecord | EndTransactionRecord | RecallRecord)
        ),
        None,
    )
    return Timeline(
        msg_id=msg_id,
        trace_topic=trace_topic,
        topic=topic,
        sent=sent,
        stored=stored,
        groups=_groups(mine, dead_letters or {}),
        transactions=transactions,
        recalls=recalls,
        trace_messages=trace_messages,
        skipped=tuple(skipped),
        notes=tuple(notes),
    )


def _sent(carried: CarriedRecord) -> SentStep:
    r = carried.record
    assert isinstance(r, PubRecord)
    return SentStep(
        group=r.group,
        client_host=_host(carried),
        timestamp_ms=r.timestamp_ms,
        cost_ms=r.cost_ms,
        success=r.success,
        topic=r.topic,
        tags=r.tags,
        keys=r.keys,
        store_host=r.store_host,
        offset_msg_id=r.offset_msg_id,
        body_length=r.body_length,
        message_type=r.msg_type.java_name,
        region_id=r.region_id,
    )


def _transaction(carried: CarriedRecord) -> TransactionStep:
    r = carried.record
    assert isinstance(r, EndTransactionRecord)
    return TransactionStep(
        group=r.group,
        client_host=_host(carried),
        timestamp_ms=r.timestamp_ms,
        state=r.transaction_state,
        transaction_id=r.transaction_id,
        from_transaction_check=r.from_transaction_check,
        store_host=r.store_host,
    )


def _return_type(code: int) -> str | None:
    try:
        return ConsumeReturnType(code).name
    except ValueError:
        return None


def _groups(
    mine: Sequence[CarriedRecord], dead_letters: dict[str, DeadLetter]
) -> tuple[GroupTrace, ...]:
    afters: dict[str, SubAfterRecord] = {}
    for c in mine:
        if isinstance(c.record, SubAfterRecord):
            afters[c.record.request_id] = c.record
    befores: dict[str, list[tuple[SubBeforeRecord, str]]] = {}
    seen: set[str] = set()
    for c in mine:
        r = c.record
        if isinstance(r, SubBeforeRecord) and r.request_id not in seen:
            seen.add(r.request_id)  # a record read twice (overlapping pages) counts once
            befores.setdefault(r.group, []).append((r, c.born_host))
    # A SubAfter whose SubBefore was lost still shows the delivery (it names its group).
    for after in afters.values():
        if after.request_id not in seen and after.group:
            stand_in = SubBeforeRecord(
                after.timestamp_ms or 0, "", after.group, after.request_id, after.msg_id, -1, None
            )
            befores.setdefault(after.group, []).append((stand_in, ""))
            seen.add(after.request_id)
    groups = []
    for name in sorted(befores):
        pairs = sorted(befores[name], key=lambda p: (p[0].timestamp_ms, p[0].retry_times))
        deliveries = []
        for attempt, (before, host) in enumerate(pairs, start=1):
            paired = afters.get(before.request_id)
            deliveries.append(
                Delivery(
                    attempt=attempt,
                    request_id=before.request_id,
                    client_host=host,
                    timestamp_ms=before.timestamp_ms,
                    retry_times=before.retry_times,
                    cost_ms=None if paired is None else paired.cost_ms,
                    success=None if paired is None else paired.success,
                    return_type=None if paired is None else _return_type(paired.context_code),
                    region_id=before.region_id,
                )
            )
        last = deliveries[-1]
        dead_letter = dead_letters.get(name)
        if last.success:
            status = CONSUMED
        elif dead_letter is not None:
            status = DEAD_LETTERED
        elif last.success is None:
            status = IN_PROGRESS
        else:
            status = FAILED
        groups.append(GroupTrace(name, tuple(deliveries), status, dead_letter))
    return tuple(groups)
