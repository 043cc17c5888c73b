"""Message commands: `tidemq send`, `recall`, `consume`, `message query` and
`message trace`, over tidemq.client.admin.AdminClient (and, for traces,
tidemq.client.trace.trace_timeline).

Messages are printed one per line for people (never as table cells: their
ids must come out whole, whatever the terminal's width) and as JSON objects
with `--json`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from typing import Any

import click

from tidemq.cli.output import emit, errors
from tidemq.cli.plumbing import (
    abort,
    admin_options,
    iso_time,
    parse_properties,
    parse_timestamp,
    run_admin,
)
from tidemq.client.admin import AdminClient, AdminError, KeyQueryResult
from tidemq.client.trace import DEFAULT_TRACE_TOPIC, Timeline, trace_timeline
from tidemq.client.trace.reader import DEFAULT_MAX_TRACE_MESSAGES
from tidemq.client.trace.timeline import Delivery, GroupTrace
from tidemq.common.message import MessageExt
from tidemq.common.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from tidemq.protocol import ResponseCode

__all__ = ["MESSAGE_COMMANDS", "message_json", "message_line", "refuse_group_topic"]


def message_json(message: MessageExt) -> dict[str, Any]:
    """A stored message for people and programs (body as text, or base64 if not UTF-8)."""
    data: dict[str, Any] = {
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "msg_id": message.unique_key or message.msg_id,
        "offset_msg_id": message.msg_id,
        "tags": message.tags,
        "keys": message.keys,
        "properties": dict(message.properties),
        "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp,
        "born_host": message.born_host,
        "store_host": message.store_host,
        "reconsume_times": message.reconsume_times,
        "body_size": len(message.body),
    }
    try:
        data["body"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        data["body"] = None
        data["body_base64"] = base64.b64encode(message.body).decode("ascii")
    return data


def message_line(message: MessageExt, *, offset_id: bool = False, stored: bool = False) -> str:
    """One line for people: queue and offset, the whole ids, tags, keys, body."""
    data = message_json(message)
    body = data["body"] if data["body"] is not None else f"<{data['body_size']} bytes>"
    parts = [
        f"{message.topic}/{message.queue_id}@{message.queue_offset}",
        f"id={data['msg_id']}",
    ]
    if offset_id:
        parts.append(f"offset_id={data['offset_msg_id']}")
    if stored:
        parts.append(f"stored={iso_time(message.store_timestamp)}")
    if message.tags:
        parts.append(f"tags={message.tags}")
    if message.keys:
        parts.append(f"keys={','.join(message.keys)}")
    parts.append(f"body={json.dumps(body, ensure_ascii=False)}")
    return "  ".join(parts)


def refuse_group_topic(topic: str) -> str | None:
    """Why `tidemq send` refuses `topic`, or None.

    A consumer group's retry topic (%RETRY%G) gets messages only from the
    broker, when a consumer of G sends one back (CONSUMER_SEND_MSG_BACK) with
    the original topic and the retry count in its properties; its dead-letter
    topic (%DLQ%G) only when the retries are used up. Java's client lets a
    producer send to both (Validators.checkTopic allows "%", and only system
    topics are refused), because its push consumer falls back to that when
    the broker refuses a send-back; a person typing the name means something
    else."""
    for prefix, what, where in (
        (RETRY_GROUP_TOPIC_PREFIX, "retry topic", "when one of its consumers asks for a retry"),
        (DLQ_GROUP_TOPIC_PREFIX, "dead-letter topic", "when a message's retries are used up"),
    ):
        if topic.startswith(prefix):
            group = topic[len(prefix) :]
            return (
                f"{topic} is the {what} of consumer group {group}: the broker puts messages "
                f"there {where}; send to the topic the group subscribes to instead"
            )
    return None


# -- send and recall -------------------------------------------------------------------


@click.command("send")
@click.argument("topic")
@click.argument("body")
@click.option("--tags", default=None, help="The message tag.")
@click.option("--keys", default=None, help="Space-separated keys (indexed for lookups).")
@click.option("--property", "properties", multiple=True, help="User property KEY=VALUE.")
@click.option("--count", type=click.IntRange(1, 1_000_000), default=1, show_default=True)
@click.option(
    "--deliver-at",
    default=None,
    help="Timer message: deliver at this time (epoch ms or ISO-8601; local time if no zone).",
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=None,
    help="Timer message: deliver this many seconds after the broker receives it.",
)
@admin_options
def send(
    topic: str,
    body: str,
    tags: str | None,
    keys: str | None,
    properties: tuple[str, ...],
    count: int,
    deliver_at: str | None,
    delay: float | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Send BODY to TOPIC (BODY "-" reads standard input); prints id, queue and offset,
    and for a timer message its recall handle (for `tidemq recall`)."""
    refusal = refuse_group_topic(topic)
    if refusal is not None:
        raise click.BadParameter(refusal, param_hint="TOPIC")
    user_properties = parse_properties(properties)
    deliver_at_ms = None
    if deliver_at is not None:
        if delay is not None:
            raise click.BadParameter("give --deliver-at or --delay, not both")
        try:
            deliver_at_ms = parse_timestamp(deliver_at)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--deliver-at") from None
    payload = sys.stdin.buffer.read() if body == "-" else body.encode("utf-8")

    async def send_all(admin: AdminClient) -> list[dict[str, Any]]:
        rows = []
        for _ in range(count):
            try:
                result = await admin.send(
                    topic,
                    payload,
                    tags,
                    keys,
                    user_properties,
                    deliver_at=deliver_at_ms,
                    deliver_after=delay,
                )
            except ValueError as exc:
                raise AdminError(str(exc), ResponseCode.MESSAGE_ILLEGAL) from None
            row: dict[str, Any] = {
                "msg_id": result.msg_id,
                "offset_msg_id": result.offset_msg_id,
                "broker": result.broker_name,
                "queue": result.queue_id,
                "queue_offset": result.queue_offset,
                "status": result.status,
            }
            if result.recall_handle is not None:
                row["recall_handle"] = result.recall_handle
            rows.append(row)
        return rows

    rows = run_admin(namesrv, send_all)
    if as_json:
        emit(rows, as_json=True)
        return
    # Plain lines rather than a table, so the ids are never cut at the terminal's width.
    for row in rows:
        handle = f"  recall_handle={row['recall_handle']}" if "recall_handle" in row else ""
        click.echo(
            f"{row['status']}  msg_id={row['msg_id']}  offset_msg_id={row['offset_msg_id']}  "
            f"queue={row['broker']}/{row['queue']}  queue_offset={row['queue_offset']}{handle}"
        )


@click.command("recall")
@click.argument("topic")
@click.argument("handle")
@admin_options
def recall(topic: str, handle: str, namesrv: list[str], as_json: bool) -> None:
    """Cancel a timer message of TOPIC before it is due (HANDLE: from `tidemq send`)."""
    msg_id = run_admin(namesrv, lambda admin: admin.recall(topic, handle))
    if as_json:
        emit({"topic": topic, "msg_id": msg_id, "recalled": True}, as_json=True)
    else:
        click.echo(f"recalled msg_id={msg_id} of {topic}")


# -- consume -------------------------------------------------------------------------


@click.command("consume")
@click.argument("topic")
@click.option(
    "--tags", "tags", default="*", show_default=True, help="Tag filter, e.g. 'TagA || TagB'."
)
@click.option("--sql", default=None, help="SQL92 filter on properties (instead of --tags).")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest message.")
@click.option(
    "--group",
    default=None,
    help="Consume as this group: start at its offsets, commit what was printed.",
)
@click.option(
    "--max",
    "max_messages",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many messages.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without a message.",
)
@admin_options
def consume(
    topic: str,
    tags: str,
    sql: str | None,
    from_beginning: bool,
    group: str | None,
    max_messages: int | None,
    timeout: float | None,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Print messages of TOPIC as they arrive (one line each; JSON lines with --json)."""
    if sql is not None and tags.strip() not in ("", "*"):
        raise click.UsageError("give --tags or --sql, not both")

    async def tail(admin: AdminClient) -> int:
        count = 0
        messages = admin.tail(
            topic,
            tags,
            from_beginning=from_beginning,
            sql=sql,
            group=group,
            idle_timeout=timeout,
        )
        async with contextlib.aclosing(messages):
            async for message in messages:
                if as_json:
                    line = json.dumps(message_json(message), sort_keys=True, ensure_ascii=False)
                else:
                    line = message_line(message)
                click.echo(line)
                sys.stdout.flush()
                count += 1
                if max_messages is not None and count >= max_messages:
                    break
        return count

    try:
        count = run_admin(namesrv, tail)
    except KeyboardInterrupt:
        return
    if not as_json:
        errors.print(f"{count} message{'s' if count != 1 else ''}", highlight=False)


# -- message query ---------------------------------------------------------------------


@click.group("message")
def message_group() -> None:
    """Look messages up."""


@message_group.command("query")
@click.option("--topic", default=None, help="The topic (needed with --key and a client id).")
@click.option("--key", default=None, help="A message key (KEYS).")
@click.option(
    "--id",
    "msg_id",
    default=None,
    help="A message id: the offset_msg_id alone, or the msg_id (client id) with --topic.",
)
@click.option(
    "--max",
    "max_num",
    type=click.IntRange(1, 64 * 1024),
    default=64,
    show_default=True,
    help="With --key: show at most this many (the newest).",
)
@admin_options
def message_query(
    topic: str | None,
    key: str | None,
    msg_id: str | None,
    max_num: int,
    namesrv: list[str],
    as_json: bool,
) -> None:
    """Find messages by key (--topic T --key K) or by id (--id MSGID)."""
    if (key is None) == (msg_id is None):
        raise click.UsageError("give either --key (with --topic) or --id")
    if key is not None:
        if topic is None:
            raise click.UsageError("--key needs --topic")
        _query_by_key(topic, key, max_num, namesrv, as_json)
        return
    if msg_id is None:  # unreachable after the checks above; narrows the type
        raise click.UsageError("give either --key (with --topic) or --id")
    message = run_admin(namesrv, lambda a: a.message_by_id(msg_id, topic))
    data = message_json(message)
    if not as_json:
        data["born_timestamp"] = iso_time(message.born_timestamp)
        data["store_timestamp"] = iso_time(message.store_timestamp)
        data = {k: "-" if v is None else v for k, v in data.items()}
    emit(data, as_json=as_json, title=f"message {msg_id}")


def _query_by_key(topic: str, key: str, max_num: int, namesrv: list[str], as_json: bool) -> None:
    found = run_admin(namesrv, lambda a: a.find_by_key(topic, key, max_num))
    if not found.messages:
        abort(f"no message with key {key} in topic {topic}", ResponseCode.NO_MESSAGE)
    if as_json:
        emit([message_json(m) for m in found.messages], as_json=True)
    else:
        for message in found.messages:
            click.echo(message_line(message, offset_id=True, stored=True))
    notice = cut_notice(found, key, max_num)
    if notice:
        errors.print(notice, highlight=False, soft_wrap=True)


def cut_notice(found: KeyQueryResult, key: str, max_num: int) -> str | None:
    """What to say when the result is not every message with the key."""
    shown = len(found.messages)
    if found.cut:
        return (
            f"showing the newest {shown} messages with key {key}; more have it "
            f"(raise --max above {max_num} to see them)"
        )
    if found.incomplete:
        return (
            f"{shown} messages with key {key} found; more of them were stored within one "
            "second than one index query returns, so some may be missing"
        )
    return None


# -- message trace -----------------------------------------------------------------------


@message_group.command("trace")
@click.argument("msg_id")
@click.option(
    "--trace-topic",
    default=DEFAULT_TRACE_TOPIC,
    show_default=True,
    help="The topic the clients traced to (their trace_topic).",
)
@click.option(
    "--max",
    "max_num",
    type=click.IntRange(1, 64 * 1024),
    default=DEFAULT_MAX_TRACE_MESSAGES,
    show_default=True,
    help="Read at most this many trace messages (the newest).",
)
@admin_options
def message_trace(
    msg_id: str, trace_topic: str, max_num: int, namesrv: list[str], as_json: bool
) -> None:
    """Show what happened to message MSG_ID (the msg_id a send prints): who sent
    it, when and how long it took, where it was stored, each consumer group's
    deliveries with their retries and outcome, a dead letter, a transaction's
    end. Read from the message traces clients with enable_trace=True wrote."""

    async def read(admin: AdminClient) -> Timeline:
        return await trace_timeline(admin, msg_id, trace_topic, max_trace_messages=max_num)

    timeline = run_admin(namesrv, read)
    if not timeline.found:
        why = " ".join(timeline.notes) or (
            "no trace record names it: was it sent or consumed by a client with "
            "enable_trace=True, and is MSG_ID the msg_id (client id) a send returned?"
        )
        abort(f"no trace of message {msg_id} in {trace_topic}: {why}", ResponseCode.NO_MESSAGE)
    if as_json:
        emit(timeline.to_json(), as_json=True)
        return
    for line in timeline_lines(timeline):
        click.echo(line)
    for note in timeline.notes:
        errors.print(note, highlight=False, soft_wrap=True)
    for reason in timeline.skipped:
        errors.print(f"unreadable trace record skipped: {reason}", highlight=False, soft_wrap=True)


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def timeline_lines(timeline: Timeline) -> list[str]:
    """A Timeline for people: one line per step, ids whole."""
    lines = [
        f"message {timeline.msg_id}"
        + (f" of topic {timeline.topic}" if timeline.topic else "")
        + f"  ({_plural(timeline.trace_messages, 'trace message')} in {timeline.trace_topic})"
    ]
    for sent in timeline.sent:
        lines.append(
            f"  sent      {iso_time(sent.timestamp_ms)}  group {sent.group}  "
            f"client {sent.client_host}  cost {_ms(sent.cost_ms)}  "
            f"{'SEND_OK' if sent.success else 'not SEND_OK'}  {sent.message_type}"
            + f"  region {sent.region_id}"
            + (f"  tags {sent.tags}" if sent.tags else "")
            + (f"  keys {sent.keys}" if sent.keys else "")
        )
    stored = timeline.stored
    if stored is not None:
        where = f"on {stored.store_host}"
        if stored.queue_id is not None:
            where += f"  queue {stored.queue_id} offset {stored.queue_offset}"
        when = iso_time(stored.store_timestamp_ms or 0)
        lines.append(f"  stored    {when}  {where}  offset_msg_id {stored.offset_msg_id}")
    for step in timeline.transactions:
        check = "  (answering a broker check)" if step.from_transaction_check else ""
        lines.append(
            f"  end transaction  {iso_time(step.timestamp_ms)}  group {step.group}  "
            f"client {step.client_host}  {step.state}  "
            f"transaction_id {step.transaction_id or '-'}{check}"
        )
    for recall in timeline.recalls:
        lines.append(
            f"  recalled  {iso_time(recall.timestamp_ms)}  group {recall.group}  "
            f"client {recall.client_host}  {'ok' if recall.success else 'refused'}"
        )
    if not timeline.groups:
        lines.append("  no consumer group's delivery is traced")
    for group in timeline.groups:
        lines.append(f"  consumer group {group.group}: {_group_summary(group)}")
        lines.extend(f"    {_delivery_line(d)}" for d in group.deliveries)
        if group.dead_letter is not None:
            lines.append(
                f"    dead letter  {iso_time(group.dead_letter.store_timestamp_ms)}  "
                f"in {group.dead_letter.topic}  offset_msg_id {group.dead_letter.offset_msg_id}"
            )
    return lines


def _group_summary(group: GroupTrace) -> str:
    retries = _plural(group.retries, "retry").replace("retrys", "retries")
    deliveries = _plural(len(group.deliveries), "delivery").replace("deliverys", "deliveries")
    return f"{group.status} ({deliveries}, {retries})"


def _delivery_line(delivery: Delivery) -> str:
    if delivery.success is None:
        outcome = "no outcome traced yet"
    else:
        outcome = "succeeded" if delivery.success else "failed"
        if delivery.return_type is not None:
            outcome += f" ({delivery.return_type})"
    retry = "-" if delivery.retry_times < 0 else str(delivery.retry_times)
    return (
        f"#{delivery.attempt}  {iso_time(delivery.timestamp_ms)}  client {delivery.client_host}  "
        f"retry {retry}  cost {_ms(delivery.cost_ms)}  {outcome}"
        + (f"  region {delivery.region_id}" if delivery.region_id else "")
    )


MESSAGE_COMMANDS: tuple[click.Command, ...] = (message_group, send, recall, consume)
"""Everything this module adds to the `tidemq` group."""
