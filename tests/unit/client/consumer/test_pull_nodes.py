"""Where a pull and an offset go: the suggestion table and the route lookup
(PullAPIWrapper, MQClientInstance.findBrokerAddressInSubscribe)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.pull_nodes import MASTER_ID, PullNodeTable
from tidemq.client.instance import ClientInstance, FoundBroker
from tidemq.client.model import BrokerData, TopicRoute
from tidemq.common.message import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


def instance_with(addrs: dict[int, str]) -> ClientInstance:
    instance = ClientInstance()
    route = TopicRoute("T", (), (BrokerData("C", "broker-a", addrs),))
    instance._store_route("T", route)
    return instance


def test_a_queue_never_pulled_goes_to_the_master_then_where_it_is_told() -> None:
    nodes = PullNodeTable()
    assert nodes.which(MQ) == MASTER_ID
    nodes.update(MQ, 1)
    assert nodes.which(MQ) == 1 and nodes.which(MessageQueue("T", "broker-a", 1)) == MASTER_ID
    nodes.update(MQ, -5)
    assert nodes.which(MQ) == MASTER_ID


def test_the_suggested_broker_when_it_is_in_the_route() -> None:
    instance = instance_with({0: "m:1", 1: "s1:1", 2: "s2:1"})
    assert instance.find_broker_in_subscribe("broker-a", 0) == FoundBroker("m:1", False)
    assert instance.find_broker_in_subscribe("broker-a", 2) == FoundBroker("s2:1", True)
    assert instance.find_broker_in_subscribe("broker-b", 0) is None


def test_a_missing_slave_id_tries_the_next_one_then_any() -> None:
    instance = instance_with({0: "m:1", 2: "s2:1"})
    assert instance.find_broker_in_subscribe("broker-a", 1) == FoundBroker("s2:1", True)
    assert instance.find_broker_in_subscribe("broker-a", 5) == FoundBroker("m:1", False)
    assert instance.find_broker_in_subscribe("broker-a", 5, only_this_broker=True) is None


def test_without_its_master_a_group_is_read_from_a_slave() -> None:
    instance = instance_with({1: "s1:1", 2: "s2:1"})
    assert instance.find_broker_in_subscribe("broker-a", 0) == FoundBroker("s1:1", True)
    assert instance.find_broker_in_subscribe("broker-a", 0, only_this_broker=True) is None


@given(
    ids=st.sets(st.integers(0, 6), min_size=1),
    wanted=st.integers(0, 8),
    only=st.booleans(),
)
def test_a_found_broker_is_in_the_route_and_slave_means_not_the_master(
    ids: set[int], wanted: int, only: bool
) -> None:
    addrs = {broker_id: f"b{broker_id}:1" for broker_id in ids}
    found = instance_with(addrs).find_broker_in_subscribe("broker-a", wanted, only_this_broker=only)
    if found is None:
        assert only and wanted not in ids and (wanted == 0 or wanted + 1 not in ids)
        return
    assert found.address in addrs.values()
    if wanted in ids:
        assert found.address == addrs[wanted]
    found_id = int(found.address[1:-2])
    assert found.slave is (found_id != MASTER_ID)
