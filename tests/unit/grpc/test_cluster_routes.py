"""broker_queues and endpoints_of: a name server's route to the queues a RocketMQ 5
client is shown, and "host:port" to its Endpoints (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb

from tidemq.grpc.cluster_routes import BrokerQueues, broker_queues, endpoints_of

OWN = "10.0.0.1:10911"


def route(*brokers: tuple[str, str | None, int]) -> dict[str, Any]:
    """(name, master address or None, perm) per broker, 4 queues each."""
    return {
        "queueDatas": [
            {"brokerName": n, "readQueueNums": 4, "writeQueueNums": 4, "perm": p}
            for n, _, p in brokers
        ],
        "brokerDatas": [
            {"cluster": "C", "brokerName": n, "brokerAddrs": {"0": a} if a else {"1": "x:1"}}
            for n, a, _ in brokers
        ],
    }


def test_each_broker_at_its_endpoint_and_this_one_as_dialled() -> None:
    table = route(("broker-b", "10.0.0.2:10911", 4), ("broker-a", OWN, 6))
    found = broker_queues(table, OWN, {"10.0.0.2:10911": "10.0.0.2:8081"})
    assert found == [
        BrokerQueues("broker-a", None, 4, 4, 6),
        BrokerQueues("broker-b", "10.0.0.2:8081", 4, 4, 4),  # its perm as the route says
    ]


def test_brokers_without_a_master_or_a_known_endpoint_are_left_out() -> None:
    table = route(("a", OWN, 6), ("b", None, 6), ("c", "10.0.0.3:10911", 6))
    assert [b.broker_name for b in broker_queues(table, OWN, {})] == ["a"]
    assert broker_queues({}, OWN, {}) == []


@given(
    names=st.lists(st.sampled_from("abcdef"), unique=True, max_size=6),
    known=st.sets(st.sampled_from("abcdef")),
)
def test_only_reachable_brokers_each_once(names: list[str], known: set[str]) -> None:
    table = route(*((n, f"10.0.1.{ord(n)}:10911", 6) for n in names))
    grpc = {f"10.0.1.{ord(n)}:10911": f"10.0.1.{ord(n)}:8081" for n in known}
    found = broker_queues(table, OWN, grpc)
    assert [b.broker_name for b in found] == sorted(set(names) & known)


def test_endpoints_of_ips_and_names() -> None:
    ipv4 = endpoints_of("127.0.0.1:8081")
    assert ipv4.scheme == pb.AddressScheme.IPv4
    assert (ipv4.addresses[0].host, ipv4.addresses[0].port) == ("127.0.0.1", 8081)
    assert endpoints_of("[::1]:9").scheme == pb.AddressScheme.IPv6
    named = endpoints_of("broker-b.internal:8081")
    assert named.scheme == pb.AddressScheme.DOMAIN_NAME
    assert named.addresses[0].host == "broker-b.internal"
