"""RouteTable: route JSON, unions, slaves, expiry, channels, deletes; a Hypothesis model check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.common.clock import ManualClock
from tidemq.namesrv.routes import (
    BROKER_EXPIRY_MS,
    QueueData,
    RegisterResult,
    RouteTable,
    parse_topic_config_table,
)

A_ADDR, B_ADDR, A_SLAVE_ADDR = "127.0.0.1:10911", "127.0.0.1:20911", "127.0.0.1:10921"


def topic_config(
    name: str, read: int = 4, write: int = 4, perm: int = 6, **extra: object
) -> dict[str, object]:
    return {
        "topicName": name,
        "readQueueNums": read,
        "writeQueueNums": write,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        **extra,
    }


def register(
    table: RouteTable,
    name: str = "broker-a",
    addr: str = A_ADDR,
    broker_id: int = 0,
    topics: dict[str, dict[str, object]] | None = None,
    *,
    cluster: str = "DefaultCluster",
    channel: object = None,
    ha: str = "",
) -> RegisterResult:
    return table.register(
        cluster=cluster,
        broker_name=name,
        broker_addr=addr,
        broker_id=broker_id,
        ha_server_addr=ha,
        topic_configs=topics,
        channel=channel,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def table(clock: ManualClock) -> RouteTable:
    return RouteTable(clock)


def test_route_json_is_exactly_the_protocol_doc_shape(table: RouteTable) -> None:
    register(table, topics={"TopicTest": topic_config("TopicTest")})
    assert table.route("TopicTest") == {
        "orderTopicConf": None,
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicSysFlag": 0,
            }
        ],
        "brokerDatas": [
            {
                "cluster": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddrs": {"0": A_ADDR},
            }
        ],
        "filterServerTable": {},
    }


def test_unknown_topic_has_no_route(table: RouteTable) -> None:
    assert table.route("NoSuchTopic") is None
    register(table, topics={"TopicTest": topic_config("TopicTest")})
    assert table.route("NoSuchTopic") is None


def test_two_brokers_serving_one_topic_give_the_union_sorted_by_name(table: RouteTable) -> None:
    register(table, "broker-b", B_ADDR, topics={"T": topic_config("T", 8, 8)})
    register(table, "broker-a", A_ADDR, topics={"T": topic_config("T", 4, 2, perm=4)})
    route = table.route("T")
    assert route is not None
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [
        (4, 2, 4),
        (8, 8, 6),
    ]
    assert [b["brokerAddrs"] for b in route["brokerDatas"]] == [{"0": A_ADDR}, {"0": B_ADDR}]


def test_registrations_merge_topics_and_update_changed_ones(table: RouteTable) -> None:
    register(table, topics={"T1": topic_config("T1"), "T2": topic_config("T2")})
    # An incremental registration (Java sends only a new topic) keeps the others.
    register(table, topics={"T3": topic_config("T3", 2, 2)})
    register(table, topics={"T1": topic_config("T1", 16, 16)})
    assert table.all_topics() == ["T1", "T2", "T3"]
    route = table.route("T1")
    assert route is not None and route["queueDatas"][0]["readQueueNums"] == 16


def test_topic_name_defaults_to_the_table_key_and_extra_fields_are_ignored() -> None:
    parsed = parse_topic_config_table(
        {"T": {"readQueueNums": 1, "writeQueueNums": 2, "perm": 7, "attributes": {}}}
    )
    assert parsed == {"T": QueueData(1, 2, 7, 0)}


@pytest.mark.parametrize(
    "config",
    [
        "not an object",
        {"writeQueueNums": 4, "perm": 6},
        {"readQueueNums": "4", "writeQueueNums": 4, "perm": 6},
        {"readQueueNums": True, "writeQueueNums": 4, "perm": 6},
        {"readQueueNums": -1, "writeQueueNums": 4, "perm": 6},
        {"topicName": "", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
    ],
)
def test_bad_topic_configs_are_refused_without_changing_anything(
    table: RouteTable, config: object
) -> None:
    register(table, topics={"Good": topic_config("Good")})
    with pytest.raises(ValueError):
        register(table, "broker-b", B_ADDR, topics={"Good": topic_config("Good"), "T": config})  # type: ignore[dict-item]
    assert [b.broker_addr for b in table.brokers()] == [A_ADDR]
    route = table.route("Good")
    assert route is not None and len(route["queueDatas"]) == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"cluster": ""}, {"name": ""}, {"addr": ""}, {"broker_id": -1}],
)
def test_bad_registrations_are_refused(table: RouteTable, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        register(table, **kwargs)
    assert table.brokers() == []


def test_a_slave_joins_the_group_learns_its_master_and_its_topics_are_ignored(
    table: RouteTable,
) -> None:
    assert register(table, topics={"T": topic_config("T")}, ha="127.0.0.1:10912") == (
        RegisterResult()
    )
    result = register(
        table, "broker-a", A_SLAVE_ADDR, 1, topics={"SlaveOnly": topic_config("SlaveOnly")}
    )
    assert result == RegisterResult(ha_server_addr="127.0.0.1:10912", master_addr=A_ADDR)
    assert table.all_topics() == ["T"]
    route = table.route("T")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": A_ADDR, "1": A_SLAVE_ADDR}


def test_a_slave_without_a_live_master_learns_nothing(table: RouteTable) -> None:
    assert register(table, addr=A_SLAVE_ADDR, broker_id=1) == RegisterResult()


def test_cluster_info_matches_javas_cluster_info(table: RouteTable) -> None:
    register(table, "broker-b", B_ADDR, cluster="C2")
    register(table, "broker-a", A_ADDR)
    register(table, "broker-a", A_SLAVE_ADDR, 1)
    assert table.cluster_info() == {
        "brokerAddrTable": {
            "broker-a": {
                "cluster": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddrs": {"0": A_ADDR, "1": A_SLAVE_ADDR},
            },
            "broker-b": {"cluster": "C2", "brokerName": "broker-b", "brokerAddrs": {"0": B_ADDR}},
        },
        "clusterAddrTable": {"C2": ["broker-b"], "DefaultCluster": ["broker-a"]},
    }


def test_a_broker_silent_for_120_seconds_expires(table: RouteTable, clock: ManualClock) -> None:
    register(
        table, "broker-a", A_ADDR, topics={"T": topic_config("T"), "OnlyA": topic_config("OnlyA")}
    )
    register(table, "broker-b", B_ADDR, topics={"T": topic_config("T")})
    clock.advance(60)
    register(table, "broker-b", B_ADDR)  # b keeps registering, a falls silent
    clock.advance(60)
    assert table.expire() == []  # exactly 120 s: not yet (Java: last + 120000 < now)
    clock.advance(0.001)
    [expired] = table.expire()
    assert (expired.broker_name, expired.broker_addr) == ("broker-a", A_ADDR)
    assert table.route("OnlyA") is None
    route = table.route("T")
    assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["broker-b"]
    assert list(table.cluster_info()["brokerAddrTable"]) == ["broker-b"]
    assert table.all_topics() == ["T"]


def test_expire_takes_an_explicit_time(table: RouteTable, clock: ManualClock) -> None:
    register(table)
    assert table.expire(clock.now_ms() + BROKER_EXPIRY_MS) == []
    assert len(table.expire(clock.now_ms() + BROKER_EXPIRY_MS + 1)) == 1


def test_when_the_master_expires_the_slave_keeps_the_group(
    table: RouteTable, clock: ManualClock
) -> None:
    register(table, topics={"T": topic_config("T")})
    clock.advance(100)
    register(table, addr=A_SLAVE_ADDR, broker_id=1)
    clock.advance(30)
    assert [r.broker_addr for r in table.expire()] == [A_ADDR]
    route = table.route("T")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"1": A_SLAVE_ADDR}


def test_closing_a_channel_removes_only_the_brokers_registered_over_it(table: RouteTable) -> None:
    register(table, "broker-a", A_ADDR, topics={"T": topic_config("T")}, channel="conn-1")
    register(table, "broker-b", B_ADDR, topics={"T": topic_config("T")}, channel="conn-2")
    removed = table.remove_channel("conn-1")
    assert [r.broker_addr for r in removed] == [A_ADDR]
    assert table.remove_channel("conn-1") == []
    assert [b.broker_addr for b in table.brokers()] == [B_ADDR]
    # A broker that re-registered over a new connection is not removed with the old one.
    register(table, "broker-b", B_ADDR, channel="conn-3")
    assert table.remove_channel("conn-2") == []


def test_unregister_removes_the_broker(table: RouteTable) -> None:
    register(table, topics={"T": topic_config("T")})
    record = table.unregister(A_ADDR)
    assert record is not None and record.broker_name == "broker-a"
    assert table.unregister(A_ADDR) is None
    assert table.route("T") is None and table.all_topics() == []
    assert table.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_delete_topic_everywhere_or_in_one_cluster(table: RouteTable) -> None:
    register(table, "broker-a", A_ADDR, topics={"T": topic_config("T"), "U": topic_config("U")})
    register(table, "broker-b", B_ADDR, topics={"T": topic_config("T")}, cluster="C2")
    assert table.delete_topic("T", cluster="C2")
    route = table.route("T")
    assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["broker-a"]
    assert not table.delete_topic("T", cluster="C3")
    assert table.delete_topic("T")
    assert not table.delete_topic("T")
    assert table.route("T") is None and table.all_topics() == ["U"]
    # A master registering it again brings it back.
    register(table, "broker-b", B_ADDR, topics={"T": topic_config("T")}, cluster="C2")
    assert table.all_topics() == ["T", "U"]


def test_a_slave_promoted_while_the_old_master_lingers_takes_slot_zero(table: RouteTable) -> None:
    register(table, topics={"T": topic_config("T")})
    register(table, addr=A_SLAVE_ADDR, broker_id=1)
    register(table, addr=A_SLAVE_ADDR, broker_id=0)
    assert [b.broker_addr for b in table.brokers()] == [A_SLAVE_ADDR]
    route = table.route("T")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"0": A_SLAVE_ADDR}


def test_a_promoted_sole_slave_keeps_the_groups_topics(table: RouteTable) -> None:
    register(table, topics={"T": topic_config("T")})
    register(table, addr=A_SLAVE_ADDR, broker_id=1)
    table.unregister(A_ADDR)
    register(table, addr=A_SLAVE_ADDR, broker_id=0)
    route = table.route("T")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"0": A_SLAVE_ADDR}


def test_a_new_address_takes_over_a_slot(table: RouteTable) -> None:
    register(table, topics={"T": topic_config("T")}, channel="old")
    register(table, addr="127.0.0.1:30911", channel="new")  # master restarted elsewhere
    assert [b.broker_addr for b in table.brokers()] == ["127.0.0.1:30911"]
    route = table.route("T")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:30911"}
    assert table.remove_channel("old") == []


def test_an_address_moving_to_another_group_leaves_the_old_one(table: RouteTable) -> None:
    register(table, "broker-a", A_ADDR, topics={"T": topic_config("T")})
    register(table, "broker-z", A_ADDR, topics={"Z": topic_config("Z")})
    assert table.all_topics() == ["Z"]
    assert list(table.cluster_info()["brokerAddrTable"]) == ["broker-z"]


# --- a model check ----------------------------------------------------------------

NAMES = ["a", "b", "c"]
ADDRS = ["h1:1", "h2:2", "h3:3", "h4:4"]
TOPICS = ["T1", "T2", "T3"]
CLUSTERS = ["C1", "C2"]
CHANNELS = ["ch1", "ch2"]

operations = st.one_of(
    st.tuples(
        st.just("register"),
        st.sampled_from(CLUSTERS),
        st.sampled_from(NAMES),
        st.sampled_from(ADDRS),
        st.sampled_from([0, 0, 1]),
        st.frozensets(st.sampled_from(TOPICS)),
        st.integers(1, 8),
        st.sampled_from(CHANNELS),
    ),
    st.tuples(st.just("unregister"), st.sampled_from(ADDRS)),
    st.tuples(st.just("advance"), st.integers(0, 130)),
    st.tuples(st.just("close"), st.sampled_from(CHANNELS)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS), st.sampled_from([None, *CLUSTERS])),
)


class Model:
    """The same rules stated plainly: one broker per address and per (name, id) slot."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[str, int, str, str, int]] = {}  # addr -> name,id,cluster,ch,ms
        self.group_cluster: dict[str, str] = {}
        self.topics: dict[str, dict[str, int]] = {}  # topic -> name -> queue count

    def names(self) -> set[str]:
        return {entry[0] for entry in self.live.values()}

    def prune(self) -> None:
        alive = self.names()
        for topic in list(self.topics):
            self.topics[topic] = {n: q for n, q in self.topics[topic].items() if n in alive}
            if not self.topics[topic]:
                del self.topics[topic]

    def register(
        self, cluster: str, name: str, addr: str, broker_id: int, topics: frozenset[str],
        queues: int, channel: str, now: int,
    ) -> None:  # fmt: skip
        self.live = {
            a: e for a, e in self.live.items() if a != addr and (e[0], e[1]) != (name, broker_id)
        }
        self.live[addr] = (name, broker_id, cluster, channel, now)
        self.group_cluster[name] = cluster
        if broker_id == 0:
            for topic in topics:
                self.topics.setdefault(topic, {})[name] = queues
        self.prune()

    def remove(self, keep: Any) -> None:
        self.live = {a: e for a, e in self.live.items() if keep(a, e)}
        self.prune()

    def delete(self, topic: str, cluster: str | None) -> None:
        entries = self.topics.get(topic, {})
        for name in [n for n in entries if cluster is None or self.group_cluster[n] == cluster]:
            del entries[name]
        if not entries:
            self.topics.pop(topic, None)

    def expected_groups(self) -> dict[str, dict[str, object]]:
        groups: dict[str, dict[str, object]] = {}
        for addr, (name, broker_id, _, _, _) in sorted(self.live.items(), key=lambda i: i[1][1]):
            group = groups.setdefault(
                name,
                {"cluster": self.group_cluster[name], "brokerName": name, "brokerAddrs": {}},
            )
            group["brokerAddrs"][str(broker_id)] = addr  # type: ignore[index]
        return groups


def check(table: RouteTable, model: Model) -> None:
    assert {
        (r.broker_addr, r.broker_name, r.broker_id, r.cluster, r.channel) for r in table.brokers()
    } == {(a, e[0], e[1], e[2], e[3]) for a, e in model.live.items()}
    groups = model.expected_groups()
    info = table.cluster_info()
    assert info["brokerAddrTable"] == groups
    clusters: dict[str, list[str]] = {}
    for name in sorted(groups):
        clusters.setdefault(model.group_cluster[name], []).append(name)
    assert info["clusterAddrTable"] == clusters
    assert table.all_topics() == sorted(model.topics)
    for topic in TOPICS:
        route = table.route(topic)
        if topic not in model.topics:
            assert route is None
            continue
        assert route is not None
        entries = model.topics[topic]
        assert [(q["brokerName"], q["readQueueNums"]) for q in route["queueDatas"]] == sorted(
            entries.items()
        )
        assert route["brokerDatas"] == [groups[name] for name in sorted(entries)]


@settings(max_examples=300, deadline=None)
@given(st.lists(operations, max_size=40))
def test_route_table_matches_a_plain_model(ops: list[tuple[Any, ...]]) -> None:
    clock = ManualClock()
    table = RouteTable(clock)
    model = Model()
    for op in ops:
        kind = op[0]
        if kind == "register":
            _, cluster, name, addr, broker_id, topics, queues, channel = op
            table.register(
                cluster=cluster,
                broker_name=name,
                broker_addr=addr,
                broker_id=broker_id,
                topic_configs={t: topic_config(t, queues, queues) for t in topics},
                channel=channel,
            )
            model.register(cluster, name, addr, broker_id, topics, queues, channel, clock.now_ms())
        elif kind == "unregister":
            table.unregister(op[1])
            model.remove(lambda a, _e, addr=op[1]: a != addr)
        elif kind == "advance":
            clock.advance(op[1])
            expired = {r.broker_addr for r in table.expire()}
            now = clock.now_ms()
            assert expired == {a for a, e in model.live.items() if e[4] + BROKER_EXPIRY_MS < now}
            model.remove(lambda _a, e, now=now: e[4] + BROKER_EXPIRY_MS >= now)
        elif kind == "close":
            table.remove_channel(op[1])
            model.remove(lambda _a, e, ch=op[1]: e[3] != ch)
        else:
            table.delete_topic(op[1], op[2])
            model.delete(op[1], op[2])
        check(table, model)


def perms(table: RouteTable, topic: str) -> dict[str, int]:
    route = table.route(topic)
    assert route is not None
    return {q["brokerName"]: q["perm"] for q in route["queueDatas"]}


def test_wiping_a_brokers_write_permission_outlasts_its_registrations() -> None:
    table = RouteTable(ManualClock())
    topics = {"Orders": topic_config("Orders"), "Archive": topic_config("Archive", perm=4)}
    register(table, "broker-a", A_ADDR, topics=topics)
    register(table, "broker-b", B_ADDR, topics={"Orders": topic_config("Orders")})
    register(table, "broker-a", A_SLAVE_ADDR, broker_id=1, topics=topics)

    assert table.wipe_write_perm("broker-a") == 2
    assert perms(table, "Orders") == {"broker-a": 4, "broker-b": 6}
    register(table, "broker-a", A_ADDR, topics=topics)  # the periodic registration
    assert perms(table, "Orders") == {"broker-a": 4, "broker-b": 6}
    assert table.wipe_write_perm("broker-zz") == 0  # no such group: nothing to wipe

    assert table.add_write_perm("broker-a") == 2
    assert perms(table, "Orders") == {"broker-a": 6, "broker-b": 6}
    assert perms(table, "Archive") == {"broker-a": 4}  # read-only stays read-only (Java: RW)


def test_a_restarted_master_or_a_new_group_comes_back_writable() -> None:
    table = RouteTable(ManualClock())
    topics = {"Orders": topic_config("Orders")}
    register(table, "broker-a", A_ADDR, topics=topics)
    register(table, "broker-a", A_SLAVE_ADDR, broker_id=1, topics=topics)
    table.wipe_write_perm("broker-a")
    table.unregister(A_ADDR)  # the master stops; its slave keeps the group
    assert table.write_wiped("broker-a")
    register(table, "broker-a", A_ADDR, topics=topics)  # Java: registerFirst
    assert perms(table, "Orders") == {"broker-a": 6}

    table.wipe_write_perm("broker-a")
    table.unregister(A_ADDR)
    table.unregister(A_SLAVE_ADDR)  # the whole group goes
    assert not table.write_wiped("broker-a")
