"""The broker's traffic and client families, read from BrokerStats and the client tables.

Names, labels and rules as RocketMQ 5's BrokerMetricsManager (apache/rocketmq
broker/.../metrics/BrokerMetricsManager.java and the processors that record
into it):

- messages/throughput in and the message size: labels topic, message_type,
  is_system; retry and DLQ topics are not counted (isRetryOrDlqTopic);
- messages/throughput out: topic, consumer_group, is_system, and is_retry
  for POP deliveries (PopMessageProcessor); pulls of retry and DLQ topics
  are not counted (DefaultPullMessageResultHandler);
- dead letters: consumer_group, topic, is_system;
- producer connections: language, version, protocol_type; consumer
  connections: consumer_group, language, version, consume_mode,
  protocol_type, is_system;
- transactions: commits, rollbacks and the finish latency per topic, the
  half messages waiting per topic (RocketMQ names the latency's unit "ms"
  but records whole seconds: so does tidemq).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

from tidemq.broker.consumers import ClientChannel, ConsumerManager, ProducerManager
from tidemq.broker.groups import is_system_group
from tidemq.broker.stats import BrokerStats
from tidemq.broker.topics import is_system_topic
from tidemq.common.histogram import Histogram
from tidemq.common.names import is_dlq_topic, is_retry_topic
from tidemq.protocol.versions import version_name
from tidemq.transport import Connection
from tidemq.web.metrics.exposition import Exposition, Labels, bool_label

__all__ = ["ConsumerClient", "client_families", "traffic_families", "transaction_families"]

_CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}
"""ConsumeType's typeCN, lower-cased (the consume_mode label)."""


@dataclass(frozen=True, slots=True)
class ConsumerClient:
    """A consumer connection the consumer table does not hold (a gRPC client)."""

    group: str
    language: str
    version: str
    consume_mode: str
    protocol_type: str


def _counted(topic: str) -> bool:
    return not (is_retry_topic(topic) or is_dlq_topic(topic))


def traffic_families(exposition: Exposition, stats: BrokerStats) -> list[Metric]:
    ins: list[tuple[Labels, int, int, Histogram]] = []
    for topic, puts in list(stats.puts.items()):
        if not _counted(topic):
            continue
        topic_system = bool_label(is_system_topic(topic))
        for kind, typed in list(puts.by_type.items()):
            labels = {"topic": topic, "message_type": kind, "is_system": topic_system}
            ins.append((labels, typed.messages, typed.bytes, typed.sizes))
    outs: list[tuple[Labels, int, int]] = []
    for (topic, group), gets in list(stats.gets.items()):
        if _counted(topic):
            system = is_system_topic(topic) or is_system_group(group)
            labels = {"topic": topic, "consumer_group": group, "is_system": bool_label(system)}
            outs.append((labels, gets.rate.total, gets.bytes))
    for (topic, group, is_retry), popped in list(stats.pops.items()):
        system = is_system_topic(topic) or is_system_group(group)
        labels = {
            "topic": topic,
            "consumer_group": group,
            "is_system": bool_label(system),
            "is_retry": bool_label(is_retry),
        }
        outs.append((labels, popped.messages, popped.bytes))
    dead = [
        (
            {
                "consumer_group": group,
                "topic": topic,
                "is_system": bool_label(is_system_topic(topic) or is_system_group(group)),
            },
            count,
        )
        for (group, topic), count in list(stats.dead_letters.items())
    ]
    return [
        exposition.counter(
            "rocketmq_messages_in_total",
            "Total number of incoming messages",
            ((labels, messages) for labels, messages, _, _ in ins),
        ),
        exposition.counter(
            "rocketmq_throughput_in_total",
            "Total traffic of incoming messages",
            ((labels, size) for labels, _, size, _ in ins),
        ),
        exposition.histogram(
            "rocketmq_message_size",
            "Incoming messages size",
            ((labels, sizes) for labels, _, _, sizes in ins),
        ),
        exposition.counter(
            "rocketmq_messages_out_total",
            "Total number of outgoing messages",
            ((labels, messages) for labels, messages, _ in outs),
        ),
        exposition.counter(
            "rocketmq_throughput_out_total",
            "Total traffic of outgoing messages",
            ((labels, size) for labels, _, size in outs),
        ),
        exposition.counter(
            "rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages", dead
        ),
    ]


def _protocol(channel: ClientChannel) -> str:
    return "remoting" if isinstance(channel.connection, Connection) else "grpc"


def _version(channel: ClientChannel) -> str:
    return version_name(channel.version).lower()


def client_families(
    exposition: Exposition,
    producers: ProducerManager,
    consumers: ConsumerManager,
    other_consumers: Callable[[], Sequence[ConsumerClient]] | None = None,
) -> list[Metric]:
    producer_counts: dict[tuple[str, str, str], int] = {}
    for group in producers.groups():
        for channel in producers.members(group):
            key = (channel.language.lower(), _version(channel), _protocol(channel))
            producer_counts[key] = producer_counts.get(key, 0) + 1
    consumer_counts: dict[tuple[str, str, str, str, str], int] = {}
    for group in consumers.groups():
        info = consumers.get(group)
        if info is None:
            continue
        mode = _CONSUME_MODES.get(info.consume_type, info.consume_type.lower())
        for channel in info.channels.values():
            member = (group, channel.language.lower(), _version(channel), mode, _protocol(channel))
            consumer_counts[member] = consumer_counts.get(member, 0) + 1
    for client in other_consumers() if other_consumers is not None else ():
        row = (
            client.group,
            client.language,
            client.version,
            client.consume_mode,
            client.protocol_type,
        )
        consumer_counts[row] = consumer_counts.get(row, 0) + 1
    return [
        exposition.gauge(
            "rocketmq_producer_connections",
            "Producer connections",
            (
                ({"language": language, "version": version, "protocol_type": protocol}, count)
                for (language, version, protocol), count in sorted(producer_counts.items())
            ),
        ),
        exposition.gauge(
            "rocketmq_consumer_connections",
            "Consumer connections",
            _consumer_rows(consumer_counts),
        ),
    ]


def _consumer_rows(
    counts: dict[tuple[str, str, str, str, str], int],
) -> Iterator[tuple[Labels, float]]:
    for (group, language, version, mode, protocol), count in sorted(counts.items()):
        labels = {
            "consumer_group": group,
            "language": language,
            "version": version,
            "consume_mode": mode,
            "protocol_type": protocol,
            "is_system": bool_label(is_system_group(group)),
        }
        yield labels, count


def transaction_families(
    exposition: Exposition, stats: BrokerStats, waiting: dict[str, int]
) -> list[Metric]:
    ended = list(stats.transactions.items())
    return [
        exposition.gauge(
            "rocketmq_half_messages",
            "Half messages of all topics",
            (({"topic": topic}, count) for topic, count in sorted(waiting.items()) if count > 0),
        ),
        exposition.counter(
            "rocketmq_commit_messages_total",
            "Total number of commit messages",
            (({"topic": topic}, entry.commits) for topic, entry in ended),
        ),
        exposition.counter(
            "rocketmq_rollback_messages_total",
            "Total number of rollback messages",
            (({"topic": topic}, entry.rollbacks) for topic, entry in ended),
        ),
        exposition.histogram(
            "rocketmq_finish_message_latency",
            "Transaction finish latency",
            (({"topic": topic}, entry.latency) for topic, entry in ended),
            unit="milliseconds",
        ),
    ]
