"""The `tidemq` data source's options, checked once on the driver.

Spark hands options over as a case-insensitive map of strings; these
functions turn them into typed values or raise ValueError naming the option,
so a typo fails the query before any task runs. Names follow Spark's Kafka
source where one exists (startingOffsets, endingOffsets, startingTimestamp,
failOnDataLoss) and tidemq's words otherwise.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tidemq.client._base import check_group
from tidemq.spark.offsets import Position, parse_position

__all__ = [
    "DEFAULT_NAMESRV",
    "ReadOptions",
    "WriteOptions",
    "read_options",
    "write_options",
]

DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_PULL_BATCH = 1024
"""Messages per PULL_MESSAGE: the broker's own cap, the fewest round trips."""
DEFAULT_PRODUCER_GROUP = "TIDEMQ_SPARK_WRITER"
DEFAULT_SEND_BATCH = 256


@dataclass(frozen=True, slots=True)
class ReadOptions:
    namesrv: str
    topics: tuple[str, ...]
    starting: str | Position
    """"earliest", "latest" or a position (EARLIEST/LATEST allowed per queue)."""
    ending: str | Position
    """"latest" or a position (batch reads only)."""
    starting_timestamp: int | None
    filter: str
    """TAG expression ("*" when none)."""
    sql: str | None
    max_messages_per_trigger: int | None
    fail_on_data_loss: bool
    consumer_group: str | None
    pull_batch: int

    @property
    def expression(self) -> tuple[str, str]:
        """(expression, type) of the subscription pushed down to the broker."""
        return (self.sql, "SQL92") if self.sql is not None else (self.filter, "TAG")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    """Target topic when the rows have no `topic` column (or a null in it)."""
    producer_group: str
    sink_id: str | None
    """Streaming writes: whose commit ledger (from `sinkId` or the checkpoint location)."""
    send_batch: int
    send_timeout_s: float


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _namesrv(opts: Mapping[str, str]) -> str:
    value = opts.get("namesrv") or os.environ.get("TIDEMQ_NAMESRV") or DEFAULT_NAMESRV
    if not value.strip():
        raise ValueError("option namesrv is empty: give 'host:port'")
    return value.strip()


def _positive_int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option {name} must be a whole number, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"option {name} must be positive, not {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"option {name} must be true or false, not {text!r}")


def _offsets(
    opts: Mapping[str, str], name: str, words: tuple[str, ...], default: str
) -> str | Position:
    text = opts.get(name.lower(), default).strip()
    if text.lower() in words:
        return text.lower()
    if text.startswith("{"):
        try:
            return parse_position(text)
        except ValueError as exc:
            raise ValueError(f"option {name}: {exc}") from None
    raise ValueError(f"option {name} must be {' or '.join(words)} or a JSON object, not {text!r}")


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Typed read options; streams start at "latest" by default, batches at "earliest"."""
    opts = _lower(options)
    topics = tuple(t.strip() for t in opts.get("topic", "").split(",") if t.strip())
    if not topics:
        raise ValueError("option topic is required: a topic name or a comma-separated list")
    starting = _offsets(
        opts, "startingOffsets", ("earliest", "latest"), "latest" if streaming else "earliest"
    )
    ending: str | Position = "latest"
    if "endingoffsets" in opts:
        if streaming:
            raise ValueError("option endingOffsets is for batch reads only")
        ending = _offsets(opts, "endingOffsets", ("latest",), "latest")
    for position in (starting, ending):
        if isinstance(position, dict) and any(mq.topic not in topics for mq in position):
            strays = sorted({mq.topic for mq in position} - set(topics))
            raise ValueError(f"offsets name topics that are not read: {', '.join(strays)}")
    timestamp = None
    if "startingtimestamp" in opts:
        text = opts["startingtimestamp"]
        try:
            timestamp = int(text)
        except ValueError:
            raise ValueError(
                f"option startingTimestamp must be epoch milliseconds, not {text!r}"
            ) from None
        if timestamp < 0:
            raise ValueError(f"option startingTimestamp must be >= 0, not {timestamp}")
    tag_filter = opts.get("filter", "*").strip() or "*"
    sql = opts.get("sql")
    if sql is not None:
        sql = sql.strip()
        if not sql:
            raise ValueError("option sql is empty")
        if tag_filter != "*":
            raise ValueError("give option filter (TAG) or sql (SQL92), not both")
    group = opts.get("consumergroup")
    if group is not None:
        check_group(group, "consumer")
    return ReadOptions(
        namesrv=_namesrv(opts),
        topics=topics,
        starting=starting,
        ending=ending,
        starting_timestamp=timestamp,
        filter=tag_filter,
        sql=sql,
        max_messages_per_trigger=_positive_int(opts, "maxMessagesPerTrigger", None),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        consumer_group=group,
        pull_batch=min(_positive_int(opts, "pullBatchSize", DEFAULT_PULL_BATCH) or 1, 1024),
    )


def write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    opts = _lower(options)
    topic = opts.get("topic", "").strip() or None
    group = opts.get("producergroup", DEFAULT_PRODUCER_GROUP)
    check_group(group, "producer")
    sink_id = opts.get("sinkid", "").strip() or None
    if sink_id is None and opts.get("checkpointlocation"):
        digest = hashlib.sha256(opts["checkpointlocation"].encode()).hexdigest()[:16]
        sink_id = f"ckpt-{digest}"
    if streaming and sink_id is None:
        raise ValueError(
            "streaming writes need option checkpointLocation (or sinkId): the exactly-once "
            "ledger is kept per sink"
        )
    if sink_id is not None:
        check_group(sink_id, "sink id")
    timeout_ms = _positive_int(opts, "sendTimeoutMs", 10_000) or 10_000
    return WriteOptions(
        namesrv=_namesrv(opts),
        topic=topic,
        producer_group=group,
        sink_id=sink_id,
        send_batch=_positive_int(opts, "sendBatchSize", DEFAULT_SEND_BATCH) or DEFAULT_SEND_BATCH,
        send_timeout_s=timeout_ms / 1000,
    )
