"""Allocation strategies: every consumer computing from the same sorted inputs
owns a disjoint share, and together the shares cover every queue."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client._core.allocation import (
    STRATEGIES,
    AllocateStrategy,
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ByMachineRoom,
    ConsistentHash,
    MachineRoomNearby,
    md5_hash,
    queue_key,
)
from tidemq.common.message import MessageQueue

queue_lists = st.lists(
    st.builds(
        MessageQueue,
        topic=st.sampled_from(["TopicTest", "orders"]),
        broker_name=st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        queue_id=st.integers(0, 15),
    ),
    min_size=1,
    max_size=40,
    unique=True,
).map(sorted)

consumer_lists = st.lists(
    st.from_regex(r"10\.0\.0\.[0-9]{1,3}@[0-9]{1,5}", fullmatch=True),
    min_size=1,
    max_size=12,
    unique=True,
).map(sorted)

PARTITIONING: list[AllocateStrategy] = [
    Averagely(),
    AveragelyByCircle(),
    ConsistentHash(),
    ConsistentHash(virtual_nodes=1),
]


def shares(
    strategy: AllocateStrategy, queues: Sequence[MessageQueue], consumers: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    return {cid: strategy.allocate("G", cid, queues, consumers) for cid in consumers}


def assert_partition(
    allocated: dict[str, list[MessageQueue]], queues: Sequence[MessageQueue]
) -> None:
    owned = [mq for share in allocated.values() for mq in share]
    assert sorted(owned) == sorted(queues)  # union is everything, nothing twice


def queues_of(n: int, brokers: Sequence[str] = ("broker-a",)) -> list[MessageQueue]:
    return sorted(MessageQueue("TopicTest", b, i) for b in brokers for i in range(n))


# -- properties shared by the partitioning strategies ------------------------


@pytest.mark.parametrize("strategy", PARTITIONING, ids=lambda s: f"{s.name}")
@settings(max_examples=150, deadline=None)
@given(queues=queue_lists, consumers=consumer_lists)
def test_every_queue_has_exactly_one_owner(
    strategy: AllocateStrategy, queues: list[MessageQueue], consumers: list[str]
) -> None:
    assert_partition(shares(strategy, queues, consumers), queues)


@pytest.mark.parametrize("strategy", [Averagely(), AveragelyByCircle()], ids=lambda s: s.name)
@settings(max_examples=150)
@given(queues=queue_lists, consumers=consumer_lists)
def test_shares_differ_by_at_most_one(
    strategy: AllocateStrategy, queues: list[MessageQueue], consumers: list[str]
) -> None:
    sizes = [len(share) for share in shares(strategy, queues, consumers).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150)
@given(queues=queue_lists, consumers=consumer_lists)
def test_averagely_gives_contiguous_runs_in_consumer_order(
    queues: list[MessageQueue], consumers: list[str]
) -> None:
    allocated = shares(Averagely(), queues, consumers)
    flattened = [mq for cid in consumers for mq in allocated[cid]]
    assert flattened == queues  # each share a run, runs in consumer order
    sizes = [len(allocated[cid]) for cid in consumers]
    assert sizes == sorted(sizes, reverse=True)  # the bigger pages come first


@settings(max_examples=100)
@given(queues=queue_lists, consumers=consumer_lists)
def test_averagely_consumers_beyond_queue_count_get_nothing(
    queues: list[MessageQueue], consumers: list[str]
) -> None:
    allocated = shares(Averagely(), queues, consumers)
    if len(consumers) >= len(queues):
        assert all(len(allocated[cid]) == 1 for cid in consumers[: len(queues)])
        assert all(not allocated[cid] for cid in consumers[len(queues) :])
    else:
        assert all(allocated[cid] for cid in consumers)


@settings(max_examples=100)
@given(queues=queue_lists, consumers=consumer_lists)
def test_averagely_matches_the_protocol_formula(
    queues: list[MessageQueue], consumers: list[str]
) -> None:
    n, c = len(queues), len(consumers)
    for i, cid in enumerate(consumers):
        # protocol-remoting.md §6.3, verbatim
        mod = n % c
        first_ones = mod > 0 and i < mod
        if n <= c:
            size = 1
        elif first_ones:
            size = n // c + 1
        else:
            size = n // c
        start = i * size if first_ones else i * size + mod
        expected = queues[start : start + max(0, min(size, n - start))]
        assert Averagely().allocate("G", cid, queues, consumers) == expected


@pytest.mark.parametrize("strategy", PARTITIONING, ids=lambda s: s.name)
def test_current_id_not_among_consumers_gets_nothing(strategy: AllocateStrategy) -> None:
    assert strategy.allocate("G", "stranger", queues_of(4), ["a", "b"]) == []


@pytest.mark.parametrize("strategy", PARTITIONING, ids=lambda s: s.name)
@pytest.mark.parametrize(
    ("current", "queues", "consumers"),
    [("", queues_of(2), ["a"]), ("a", [], ["a"]), ("a", queues_of(2), [])],
)
def test_empty_inputs_are_rejected(
    strategy: AllocateStrategy,
    current: str,
    queues: list[MessageQueue],
    consumers: list[str],
) -> None:
    with pytest.raises(ValueError):
        strategy.allocate("G", current, queues, consumers)


# -- golden examples ------------------------------------------------------------


def test_averagely_golden_8_queues_3_consumers() -> None:
    queues = queues_of(8)
    allocated = shares(Averagely(), queues, ["c0", "c1", "c2"])
    assert [[mq.queue_id for mq in allocated[c]] for c in ("c0", "c1", "c2")] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7],
    ]


def test_averagely_by_circle_golden_8_queues_3_consumers() -> None:
    queues = queues_of(8)
    allocated = shares(AveragelyByCircle(), queues, ["c0", "c1", "c2"])
    assert [[mq.queue_id for mq in allocated[c]] for c in ("c0", "c1", "c2")] == [
        [0, 3, 6],
        [1, 4, 7],
        [2, 5],
    ]


def test_md5_hash_and_queue_key_match_java() -> None:
    # Values printed by RocketMQ's own ConsistentHashRouter.MD5Hash logic (JDK 17).
    assert md5_hash("abc") == 2416005272
    assert md5_hash("192.168.0.1@1-0") == 2325484510
    mq = MessageQueue("TopicTest", "broker-a", 0)
    assert queue_key(mq) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]"
    assert md5_hash(queue_key(mq)) == 1987926524


def test_consistent_hash_golden_matches_rocketmq_router() -> None:
    # Owners computed by compiling apache/rocketmq's ConsistentHashRouter
    # (10 virtual nodes, MD5Hash) and routing MessageQueue.toString() keys.
    consumers = ["192.168.0.1@1", "192.168.0.2@1", "192.168.0.3@1"]
    queues = queues_of(4, ("broker-a", "broker-b"))
    expected = {
        ("broker-a", 0): "192.168.0.3@1",
        ("broker-a", 1): "192.168.0.2@1",
        ("broker-a", 2): "192.168.0.1@1",
        ("broker-a", 3): "192.168.0.3@1",
        ("broker-b", 0): "192.168.0.2@1",
        ("broker-b", 1): "192.168.0.2@1",
        ("broker-b", 2): "192.168.0.3@1",
        ("broker-b", 3): "192.168.0.2@1",
    }
    owner = {
        (mq.broker_name, mq.queue_id): cid
        for cid, share in shares(ConsistentHash(), queues, consumers).items()
        for mq in share
    }
    assert owner == expected


# -- consistent hash stability -------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    queues=queue_lists,
    consumers=consumer_lists,
    newcomer=st.from_regex(r"10\.0\.1\.[0-9]{1,3}@[0-9]{1,5}", fullmatch=True),
)
def test_consistent_hash_join_moves_queues_only_to_the_newcomer(
    queues: list[MessageQueue], consumers: list[str], newcomer: str
) -> None:
    strategy = ConsistentHash()
    before = shares(strategy, queues, consumers)
    after = shares(strategy, queues, sorted([*consumers, newcomer]))
    for cid in consumers:
        assert set(after[cid]) <= set(before[cid])


def test_consistent_hash_join_moves_a_minority() -> None:
    rng = random.Random(20240601)
    queues = queues_of(16, ("broker-a", "broker-b", "broker-c", "broker-d"))
    consumers = sorted(f"10.0.0.{rng.randrange(256)}@{rng.randrange(65536)}" for _ in range(4))
    strategy = ConsistentHash()
    before = shares(strategy, queues, consumers)
    joined = sorted([*consumers, "10.0.9.9@4242"])
    after = shares(strategy, queues, joined)
    owner_before = {mq: cid for cid, share in before.items() for mq in share}
    owner_after = {mq: cid for cid, share in after.items() for mq in share}
    moved = sum(owner_before[mq] != owner_after[mq] for mq in queues)
    # About 1/5 of the queues should move; Averagely would move most of them.
    assert 0 < moved < len(queues) // 2
    avg_before = {mq: c for c, s in shares(Averagely(), queues, consumers).items() for mq in s}
    avg_after = {mq: c for c, s in shares(Averagely(), queues, joined).items() for mq in s}
    assert moved < sum(avg_before[mq] != avg_after[mq] for mq in queues)


def test_consistent_hash_without_virtual_nodes_assigns_nothing() -> None:
    assert ConsistentHash(virtual_nodes=0).allocate("G", "a", queues_of(4), ["a"]) == []
    with pytest.raises(ValueError):
        ConsistentHash(virtual_nodes=-1)


# -- fixed list and machine rooms ---------------------------------------------


def test_by_config_returns_its_list_whatever_the_inputs() -> None:
    fixed = queues_of(2)
    strategy = ByConfig(fixed)
    assert strategy.allocate("G", "a", queues_of(8), ["a", "b"]) == fixed
    assert strategy.allocate("G", "z", [], []) == fixed
    assert strategy.name == "CONFIG"


ROOM_BROKERS = ["hz@broker-a", "hz@broker-b", "sh@broker-c", "bj@broker-d", "plain", "x@y@z"]

room_queue_lists = st.lists(
    st.builds(
        MessageQueue,
        topic=st.just("T"),
        broker_name=st.sampled_from(ROOM_BROKERS),
        queue_id=st.integers(0, 7),
    ),
    min_size=1,
    max_size=30,
    unique=True,
).map(sorted)


@settings(max_examples=150)
@given(
    queues=room_queue_lists,
    consumers=consumer_lists,
    idcs=st.sets(st.sampled_from(["hz", "sh", "bj", "gz"])),
)
def test_by_machine_room_shares_exactly_the_rooms_queues(
    queues: list[MessageQueue], consumers: list[str], idcs: set[str]
) -> None:
    strategy = ByMachineRoom(idcs)
    allocated = shares(strategy, queues, consumers)
    in_rooms = [
        mq
        for mq in queues
        if mq.broker_name.count("@") == 1 and mq.broker_name.split("@")[0] in idcs
    ]
    assert_partition(allocated, in_rooms)
    sizes = [len(s) for s in allocated.values()]
    assert max(sizes) - min(sizes) <= 1


def test_by_machine_room_golden() -> None:
    queues = sorted([MessageQueue("T", b, i) for b in ("hz@a", "sh@b", "bj@c") for i in range(4)])
    strategy = ByMachineRoom({"hz", "sh"})
    ids = ["c0", "c1", "c2"]
    got = {
        cid: [(mq.broker_name, mq.queue_id) for mq in s]
        for cid, s in shares(strategy, queues, ids).items()
    }
    # 8 eligible queues: pages of 2, then the 2 left over go to c0 and c1.
    assert got == {
        "c0": [("hz@a", 0), ("hz@a", 1), ("sh@b", 2)],
        "c1": [("hz@a", 2), ("hz@a", 3), ("sh@b", 3)],
        "c2": [("sh@b", 0), ("sh@b", 1)],
    }
    assert strategy.name == "MACHINE_ROOM"


class PrefixResolver:
    """Broker `<room>@name`, consumer `<room>-...`."""

    def broker_deploy_in(self, mq: MessageQueue) -> str:
        return mq.broker_name.split("@")[0]

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("-")[0]


ROOMS = ["hz", "sh", "bj"]


@pytest.mark.parametrize(
    "fallback", [Averagely(), AveragelyByCircle(), ConsistentHash()], ids=lambda s: s.name
)
@settings(max_examples=100, deadline=None)
@given(
    queue_specs=st.sets(
        st.tuples(st.sampled_from(ROOMS), st.integers(0, 3), st.integers(0, 5)), min_size=1
    ),
    consumer_specs=st.sets(
        st.tuples(st.sampled_from(ROOMS), st.integers(0, 99)), min_size=1, max_size=8
    ),
)
def test_machine_room_nearby_keeps_rooms_and_loses_nothing(
    fallback: AllocateStrategy,
    queue_specs: set[tuple[str, int, int]],
    consumer_specs: set[tuple[str, int]],
) -> None:
    queues = sorted(MessageQueue("T", f"{r}@broker-{b}", q) for r, b, q in queue_specs)
    consumers = sorted(f"{r}-10.0.0.{n}@1" for r, n in consumer_specs)
    strategy = MachineRoomNearby(PrefixResolver(), fallback)
    allocated = shares(strategy, queues, consumers)
    assert_partition(allocated, queues)
    consumer_rooms = {c.split("-")[0] for c in consumers}
    for cid, share in allocated.items():
        for mq in share:
            room = mq.broker_name.split("@")[0]
            # own room, or a room nobody consumes in
            assert room == cid.split("-")[0] or room not in consumer_rooms


def test_machine_room_nearby_golden() -> None:
    queues = sorted(MessageQueue("T", f"{r}@b", i) for r in ("hz", "sh") for i in range(4))
    consumers = ["hz-1", "hz-2"]
    strategy = MachineRoomNearby(PrefixResolver(), Averagely())
    got = {
        c: [(mq.broker_name, mq.queue_id) for mq in s]
        for c, s in shares(strategy, queues, consumers).items()
    }
    # hz queues split among hz consumers; sh has nobody, so both share it too.
    assert got == {
        "hz-1": [("hz@b", 0), ("hz@b", 1), ("sh@b", 0), ("sh@b", 1)],
        "hz-2": [("hz@b", 2), ("hz@b", 3), ("sh@b", 2), ("sh@b", 3)],
    }
    assert strategy.name == "MACHINE_ROOM_NEARBY-AVG"


def test_machine_room_nearby_rejects_an_unknown_room() -> None:
    class Blank(PrefixResolver):
        def broker_deploy_in(self, mq: MessageQueue) -> str:
            return ""

    with pytest.raises(ValueError):
        MachineRoomNearby(Blank(), Averagely()).allocate("G", "hz-1", queues_of(2), ["hz-1"])


def test_strategies_by_name() -> None:
    assert set(STRATEGIES) == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"}
    assert all(strategy.name == name for name, strategy in STRATEGIES.items())
