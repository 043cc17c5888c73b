"""The broker's /metrics families over an in-memory broker: what sends, pulls and
offsets show as, in RocketMQ's names and labels, parsed as Prometheus reads them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.requests import PullRequest, SendRequest
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.histogram import Histogram
from tidemq.common.rpc_stats import RpcStats
from tidemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from tidemq.testing.cores import memory_core
from tidemq.testing.metrics import sample_value, samples
from tidemq.web.metrics import BrokerCollector, MergedFamilies
from tidemq.web.metrics.exposition import Exposition

COMMON = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}


class FixedStorage:
    """Storage figures of a store without files (the memory store's)."""

    def disk_used_bytes(self) -> int:
        return 123_456

    def flush_behind_bytes(self) -> int:
        return 7

    def dispatch_behind_bytes(self) -> int:
        return 0

    def earliest_message_time(self) -> int:
        return -1


@dataclass
class FakeConnection:
    """A client connection that is no remoting socket (as a gRPC session is)."""

    id: int = 1
    remote: tuple[str, int] = ("127.0.0.1", 5555)
    closed: bool = False

    def send(self, command: object) -> None: ...

    def send_oneway(self, command: object) -> None: ...

    def close(self) -> None:
        self.closed = True


def scrape(collector: BrokerCollector) -> list:  # type: ignore[type-arg]
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    text = generate_latest(MergedFamilies(registry)).decode()
    return list(text_string_to_metric_families(text))


@pytest.fixture
def broker(tmp_path: Path) -> tuple[BrokerCore, ManualClock]:
    core, _store, clock = memory_core(tmp_path, http_port=0)
    return core, clock


async def send(core: BrokerCore, topic: str, body: bytes, properties: str = "") -> None:
    await core.send.send(SendRequest("P", topic, 0, body, properties))


async def pull(core: BrokerCore, group: str, topic: str, offset: int, commit: int = 0) -> int:
    flag = sysflag.build_pull_sys_flag(commit_offset=commit > 0, suspend=False, subscription=True)
    result = await core.pull.pull(
        PullRequest(group, topic, 0, offset, sys_flag=flag, commit_offset=commit, subscription="*")
    )
    return result.message_count


async def test_sends_pulls_and_offsets_show_in_rocketmq_names(
    broker: tuple[BrokerCore, ManualClock],
) -> None:
    core, clock = broker
    consumer = ConsumerData("G", subscriptions=(Subscription("T"),))
    core.client.heartbeat(HeartbeatData("client-1", (consumer,)), FakeConnection(), version=407)
    for _ in range(3):
        await send(core, "T", b"x" * 2000)
    await send(core, "T", b"y", props.encode_properties({props.SHARDING_KEY: "order-1"}))
    clock.advance(5)
    assert await pull(core, "G", "T", 0) == 4
    clock.advance(2)
    await pull(core, "G", "T", 4, commit=1)  # G has consumed one message: three behind

    families = scrape(BrokerCollector(core, FixedStorage(), clock, rpc=[]))
    value = lambda name, **labels: sample_value(families, name, **COMMON, **labels)  # noqa: E731
    normal = {"topic": "T", "message_type": "normal", "is_system": "false"}
    assert value("rocketmq_messages_in_total", **normal) == 3
    assert value("rocketmq_messages_in_total", topic="T", message_type="fifo") == 1
    assert value("rocketmq_throughput_in_total", **normal) == 6000
    assert value("rocketmq_message_size_bucket", **normal, le="1024.0") == 0
    assert value("rocketmq_message_size_bucket", **normal, le="4096.0") == 3
    assert value("rocketmq_message_size_count", **normal) == 3
    out = {"topic": "T", "consumer_group": "G", "is_system": "false"}
    assert value("rocketmq_messages_out_total", **out) == 4
    assert value("rocketmq_throughput_out_total", **out) > 6001  # stored records, headers too
    lag = {"consumer_group": "G", "topic": "T", "is_retry": "false", "is_system": "false"}
    assert value("rocketmq_consumer_lag_messages", **lag) == 3
    assert value("rocketmq_consumer_inflight_messages", **lag) == 3  # pulled, not committed
    assert value("rocketmq_consumer_ready_messages", **lag) == 0
    assert value("rocketmq_consumer_lag_latency_milliseconds", **lag) == 7000
    assert value("rocketmq_consumer_queueing_latency_milliseconds", **lag) == 0
    client = {"consumer_group": "G", "language": "java", "version": "v4_9_7"}
    assert value("rocketmq_consumer_connections", **client, consume_mode="push") == 1
    # a client connection that is no remoting socket is a gRPC session
    assert samples(families, "rocketmq_consumer_connections")[0].labels["protocol_type"] == "grpc"
    assert value("rocketmq_topic_number") == len(core.service.topics)
    assert value("rocketmq_storage_size_bytes", storage_type="local") == 123_456
    assert value("rocketmq_storage_flush_behind_bytes", storage_medium="disk") == 7


async def test_retry_and_dlq_topics_are_not_messages_in(
    broker: tuple[BrokerCore, ManualClock],
) -> None:
    core, clock = broker
    core.service.stats.record_put("%RETRY%G", 1, 10)
    core.service.stats.record_put("%DLQ%G", 1, 10)
    core.service.stats.record_put("SCHEDULE_TOPIC_XXXX", 1, 10, "delay")
    core.service.stats.record_dead_letter("G", "T", 2)
    families = scrape(BrokerCollector(core, FixedStorage(), clock))
    topics = {s.labels["topic"] for s in samples(families, "rocketmq_messages_in_total")}
    assert topics == {"SCHEDULE_TOPIC_XXXX"}
    assert sample_value(families, "rocketmq_messages_in_total", is_system="true") == 1
    dlq = sample_value(
        families, "rocketmq_send_to_dlq_messages_total", consumer_group="G", topic="T"
    )
    assert dlq == 2


async def test_a_group_with_nothing_pulled_since_start_counts_its_offset_as_pulled(
    broker: tuple[BrokerCore, ManualClock],
) -> None:
    core, clock = broker
    for _ in range(5):
        await send(core, "T", b"z")
    core.service.groups.find("Stopped")
    core.service.offsets.commit("Stopped", "T", 0, 2)
    families = scrape(BrokerCollector(core, FixedStorage(), clock))
    lag = {"consumer_group": "Stopped", "topic": "T"}
    assert sample_value(families, "rocketmq_consumer_lag_messages", **lag) == 3
    assert sample_value(families, "rocketmq_consumer_ready_messages", **lag) == 3
    assert sample_value(families, "rocketmq_consumer_inflight_messages", **lag) == 0


def test_units_are_appended_as_rocketmq_5_1_4_serves_them() -> None:
    with_units = Exposition({}, unit_suffix=True)
    bare = Exposition({}, unit_suffix=False)
    assert with_units.name("rocketmq_rpc_latency", "milliseconds") == (
        "rocketmq_rpc_latency_milliseconds"
    )
    assert with_units.name("rocketmq_storage_flush_behind_bytes", "bytes") == (
        "rocketmq_storage_flush_behind_bytes"
    )
    assert with_units.name("rocketmq_storage_size", "bytes") == "rocketmq_storage_size_bytes"
    assert bare.name("rocketmq_rpc_latency", "milliseconds") == "rocketmq_rpc_latency"
    assert with_units.name("rocketmq_topic_number") == "rocketmq_topic_number"


def test_a_counter_and_a_histogram_read_back_as_prometheus_parses_them() -> None:
    exposition = Exposition({"node_type": "broker"})
    histogram = Histogram((1, 3))
    histogram.observe(0.5)
    histogram.observe(2)
    registry = CollectorRegistry()

    class Families:
        def collect(self) -> list:  # type: ignore[type-arg]
            return [
                exposition.counter("rocketmq_x_total", "x", [({"topic": "T"}, 4)]),
                exposition.histogram("rocketmq_y", "y", [({}, histogram)], unit="milliseconds"),
            ]

    registry.register(Families())
    text = generate_latest(registry).decode()
    assert 'rocketmq_x_total{node_type="broker",topic="T"} 4.0' in text
    assert 'rocketmq_y_milliseconds_bucket{le="1.0",node_type="broker"} 1.0' in text
    assert 'rocketmq_y_milliseconds_bucket{le="+Inf",node_type="broker"} 2.0' in text
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert parsed["rocketmq_x"].type == "counter"
    assert parsed["rocketmq_y_milliseconds"].type == "histogram"


def test_families_of_one_name_from_two_collectors_are_written_once() -> None:
    registry = CollectorRegistry(auto_describe=True)
    for node in ("nameserver", "broker"):
        stats = RpcStats("remoting", str, str)
        stats.record(105, 0, 1.0)
        exposition = Exposition({"node_type": node})

        class One:
            def __init__(self, exposition: Exposition, stats: RpcStats) -> None:
                self.exposition, self.stats = exposition, stats

            def describe(self) -> list:  # type: ignore[type-arg]
                return []

            def collect(self) -> list:  # type: ignore[type-arg]
                from tidemq.web.metrics.rpc import rpc_latency

                return [rpc_latency(self.exposition, [self.stats])]

        registry.register(One(exposition, stats))
    text = generate_latest(MergedFamilies(registry)).decode()
    assert text.count("# TYPE rocketmq_rpc_latency_milliseconds histogram") == 1
    families = list(text_string_to_metric_families(text))
    nodes = {
        s.labels["node_type"] for s in samples(families, "rocketmq_rpc_latency_milliseconds_count")
    }
    assert nodes == {"nameserver", "broker"}


@dataclass
class Renewals:
    """Figures as tidemq.grpc.renewal.ReceiptRenewals keeps them."""

    renewed: int = 5
    given_back: int = 1
    cleared: int = 2
    held: int = 3

    def __len__(self) -> int:
        return self.held


async def test_grpc_renewals_are_counted(broker: tuple[BrokerCore, ManualClock]) -> None:
    core, clock = broker
    families = scrape(BrokerCollector(core, FixedStorage(), clock, renewals=Renewals()))
    assert sample_value(families, "tidemq_grpc_held_messages") == 3
    renewals = {
        s.labels["result"]: s.value for s in samples(families, "tidemq_grpc_renewals_total")
    }
    assert renewals == {"renewed": 5, "given_back": 1, "cleared": 2}
    assert (
        samples(scrape(BrokerCollector(core, FixedStorage(), clock)), "tidemq_grpc_held_messages")
        == []
    )
