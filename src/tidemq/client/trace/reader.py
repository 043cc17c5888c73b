"""Read one message's trace from a cluster: `trace_timeline(admin, msg_id)`.

As Java's `mqadmin queryMsgTraceById` (tools/.../QueryMsgTraceByIdSubCommand.java)
does, the trace topic is queried by key = the message id (trace messages are
indexed by every msgId and message key they carry, AsyncTraceDispatcher
sendTraceDataByMQ), at most `max_trace_messages` of them (64, as there), and
only the records of that msgId are kept (TraceView). Then, where it can:

* the stored message is looked up by the offset msgId the Pub record names
  (its store time, queue and queue offset);
* for each consumer group whose last delivery failed, the group's dead-letter
  topic (%DLQ%<group>) is asked for the message by its id (UNIQ_KEY, which
  the broker's dead-letter copy keeps): found there, the group's status is
  dead-lettered.

What could not be looked up is said in `Timeline.notes`; only a failure to
query the trace topic itself raises (AdminError). A trace topic that does
not exist gives an empty timeline with a note saying so.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemq.client.admin import AdminClient, AdminError
from tidemq.client.trace.records import DEFAULT_TRACE_TOPIC, decode_trace_data
from tidemq.client.trace.timeline import (
    FAILED,
    CarriedRecord,
    DeadLetter,
    StoredStep,
    Timeline,
    build_timeline,
)
from tidemq.common.message import MessageExt
from tidemq.common.message_id import offset_message_id_address
from tidemq.common.names import dlq_topic_of
from tidemq.protocol import ResponseCode

__all__ = ["DEFAULT_MAX_TRACE_MESSAGES", "trace_timeline"]

DEFAULT_MAX_TRACE_MESSAGES = 64
"""QueryMsgTraceByIdSubCommand's maxNum default."""


async def trace_timeline(
    source: AdminClient | str | Sequence[str],
    msg_id: str,
    trace_topic: str = DEFAULT_TRACE_TOPIC,
    *,
    max_trace_messages: int = DEFAULT_MAX_TRACE_MESSAGES,
) -> Timeline:
    """The Timeline of the message with client id `msg_id` (the `msg_id` a send
    returns) from `trace_topic`; an offset msgId with no trace of its own is
    looked up and its client id (UNIQ_KEY) read instead, since traces name the
    client id. `source` is a started AdminClient, or the name server
    address(es) to open one for this call."""
    msg_id = msg_id.strip()
    if not msg_id:
        raise ValueError("the message id is empty")
    if max_trace_messages < 1:
        raise ValueError("max_trace_messages must be at least 1")
    if isinstance(source, AdminClient):
        return await _read_either_id(source, msg_id, trace_topic, max_trace_messages)
    async with AdminClient(source) as admin:
        return await _read_either_id(admin, msg_id, trace_topic, max_trace_messages)


async def _read_either_id(
    admin: AdminClient, msg_id: str, trace_topic: str, max_num: int
) -> Timeline:
    timeline = await _read(admin, msg_id, trace_topic, max_num)
    if timeline.found or offset_message_id_address(msg_id) is None:
        return timeline
    try:
        stored = await admin.view_by_id(msg_id)
    except AdminError:
        return timeline
    if not stored.unique_key:
        return timeline
    return await _read(admin, stored.unique_key, trace_topic, max_num)


async def _read(admin: AdminClient, msg_id: str, trace_topic: str, max_num: int) -> Timeline:
    notes: list[str] = []
    try:
        found = await admin.find_by_key(trace_topic, msg_id, max_num)
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        notes.append(
            f"the trace topic {trace_topic} does not exist: no client has traced to it "
            "(enable_trace=True), and the broker did not create it (trace_topic_enable)"
        )
        return build_timeline(msg_id, trace_topic, (), notes=notes)
    if found.cut:
        notes.append(f"more than {max_num} trace messages name {msg_id}: the oldest were not read")
    if found.incomplete:
        notes.append("some trace messages may be missing (the index returned a full second)")
    carried: list[CarriedRecord] = []
    skipped: list[str] = []
    holding = 0
    for message in found.messages:
        decoded = decode_trace_data(message.body)
        mine = [r for r in decoded.records if r.msg_id == msg_id]
        holding += bool(mine)
        carried.extend(CarriedRecord(r, message.born_host) for r in mine)
        skipped.extend(f"{s.reason} (in trace message {message.msg_id})" for s in decoded.skipped)
    draft = build_timeline(msg_id, trace_topic, carried)
    stored = await _stored(admin, draft, notes)
    dead_letters = await _dead_letters(admin, draft, msg_id, notes)
    return build_timeline(
        msg_id,
        trace_topic,
        carried,
        trace_messages=holding,
        skipped=skipped,
        stored=stored,
        dead_letters=dead_letters,
        notes=notes,
    )


async def _stored(admin: AdminClient, draft: Timeline, notes: list[str]) -> StoredStep | None:
    """The stored message as its broker shows it, else what the trace says."""
    stored = draft.stored
    if stored is None:
        return None
    try:
        message = await admin.view_by_id(stored.offset_msg_id, draft.topic)
    except AdminError as exc:
        notes.append(f"the stored message {stored.offset_msg_id} could not be read: {exc.message}")
        return stored
    return StoredStep(
        store_host=message.store_host or stored.store_host,
        offset_msg_id=stored.offset_msg_id,
        store_timestamp_ms=message.store_timestamp,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
    )


async def _dead_letters(
    admin: AdminClient, draft: Timeline, msg_id: str, notes: list[str]
) -> dict[str, DeadLetter]:
    """Where each group whose last delivery failed has the message in its DLQ."""
    found: dict[str, DeadLetter] = {}
    for group in draft.groups:
        if group.status != FAILED:
            continue
        topic = dlq_topic_of(group.group)
        try:
            copies: list[MessageExt] = await admin.query_by_key(topic, msg_id, 1, unique=True)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                notes.append(f"the dead-letter topic {topic} could not be searched: {exc.message}")
            continue
        if copies:
            copy = copies[0]
            found[group.group] = DeadLetter(topic, copy.store_timestamp, copy.msg_id)
    return found
