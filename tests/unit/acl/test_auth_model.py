"""The RocketMQ 5 model's pure pieces: resource texts, the deciding rule (most specific
resource, then Deny over Allow), actions and source IPs, the JSON shapes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl.auth_model import (
    Acl,
    Action,
    AuthModelError,
    Decision,
    PolicyEntry,
    Resource,
    ResourcePattern,
    User,
    UserType,
    deciding_entry,
    subject_of,
)

HOST = "10.0.0.5"
names = st.text(alphabet="abcdefgXYZ_-%0123456789", min_size=1, max_size=12)
concrete_actions = st.sampled_from([a for a in Action if a not in (Action.ALL, Action.ANY)])
decisions = st.sampled_from(list(Decision))


def entry(
    resource: str, *actions: str, decision: str = "Allow", ips: tuple[str, ...] = ()
) -> PolicyEntry:
    return PolicyEntry.build(resource, actions, decision, ips)


@pytest.mark.parametrize(
    ("text", "key", "pattern"),
    [
        ("Topic:orders", "Topic:orders", ResourcePattern.LITERAL),
        ("Topic:ord*", "Topic:ord*", ResourcePattern.PREFIXED),
        ("Group:*", "Group:*", ResourcePattern.ANY),
        ("Cluster", "Cluster:*", ResourcePattern.ANY),
        ("*", "*", ResourcePattern.ANY),
        ("topic:a", "Topic:a", ResourcePattern.LITERAL),
    ],
)
def test_resource_texts(text: str, key: str, pattern: ResourcePattern) -> None:
    resource = Resource.parse(text)
    assert resource.key == key and resource.pattern is pattern
    assert Resource.parse(resource.key) == resource


@pytest.mark.parametrize("text", ["", "Topic:", "Queue:a", "Any:a", "Topic"])
def test_bad_resources_are_refused(text: str) -> None:
    with pytest.raises(AuthModelError):
        Resource.parse(text)


@given(names, names, concrete_actions, decisions)
def test_a_deny_wins_over_an_allow_for_the_same_resource_and_action(
    name: str, prefix_tail: str, action: Action, first: Decision
) -> None:
    for text in (f"Topic:{name}", f"Topic:{name[:1]}*", "Topic:*", "*"):
        allow = entry(text, action.value)
        deny = entry(text, action.value, decision="Deny")
        for order in ((allow, deny), (deny, allow)):
            decided = deciding_entry(order, Resource.topic(name), action, HOST)
            assert decided is not None and decided.decision is Decision.DENY


@given(names, names, concrete_actions, decisions)
def test_the_most_specific_resource_decides(
    name: str, extra: str, action: Action, specific: Decision
) -> None:
    other = Decision.DENY if specific is Decision.ALLOW else Decision.ALLOW
    wanted = Resource.topic(name + extra)
    ladder = [  # most specific first
        f"Topic:{name}{extra}",
        f"Topic:{name}{extra[:-1]}*",
        f"Topic:{name[:1]}*",
        "Topic:*",
        "*",
    ]
    for i, text in enumerate(ladder):
        winner = entry(text, action.value, decision=specific.value)
        losers = [entry(t, action.value, decision=other.value) for t in ladder[i + 1 :]]
        if any(loser.resource == winner.resource for loser in losers):
            continue  # the same resource twice: that is the Deny rule above
        decided = deciding_entry([*losers, winner], wanted, action, HOST)
        assert decided == winner


@given(names, names)
def test_prefix_matching(prefix: str, rest: str) -> None:
    pattern = Resource.parse(f"Topic:{prefix}*")
    assert pattern.covers(Resource.topic(prefix + rest))
    assert pattern.covers(Resource.topic(prefix))
    assert not pattern.covers(Resource.group(prefix + rest))
    if not (rest + prefix).startswith(prefix):
        assert not pattern.covers(Resource.topic(rest + prefix))


@given(names, concrete_actions, concrete_actions)
def test_no_matching_entry_decides_nothing(name: str, granted: Action, wanted: Action) -> None:
    entries = [entry(f"Topic:{name}", granted.value), entry(f"Group:{name}", wanted.value)]
    decided = deciding_entry(entries, Resource.topic(name), wanted, HOST)
    assert (decided is None) == (granted is not wanted)


def test_all_covers_every_action_and_any_is_met_by_any_entry() -> None:
    every = entry("Topic:t", "All")
    assert all(every.covers_action(a) for a in Action)
    pub = entry("Topic:t", "Pub")
    assert pub.covers_action(Action.ANY) and not pub.covers_action(Action.SUB)


def test_source_ips() -> None:
    limited = entry("Topic:t", "Pub", ips=("10.0.0.0/24", "192.168.1.7"))
    assert limited.covers_host("10.0.0.9") and limited.covers_host("192.168.1.7")
    assert not limited.covers_host("10.0.1.1") and not limited.covers_host("::1")
    assert deciding_entry([limited], Resource.topic("t"), Action.PUB, "172.16.0.1") is None
    with pytest.raises(AuthModelError):
        entry("Topic:t", "Pub", ips=("not-an-ip",))


def test_bad_actions_and_decisions_are_refused() -> None:
    with pytest.raises(AuthModelError, match="bad action"):
        entry("Topic:t", "Publish")
    with pytest.raises(AuthModelError, match="bad decision"):
        entry("Topic:t", "Pub", decision="Maybe")
    with pytest.raises(AuthModelError, match="no action"):
        PolicyEntry.build("Topic:t", [])


def test_subjects() -> None:
    assert subject_of("alice") == subject_of("User:alice") == "User:alice"
    for bad in ("", "User:", "Role:x"):
        with pytest.raises(AuthModelError):
            subject_of(bad)


def test_json_shapes_are_rocketmqs_and_answers_carry_no_password() -> None:
    user = User("alice", "secret123", UserType.SUPER)
    assert user.to_json(with_password=False) == {
        "username": "alice",
        "userType": "Super",
        "userStatus": "enable",
    }
    assert User.from_json(user.to_json(with_password=True)) == user
    assert "secret123" not in repr(user)
    acl = Acl("User:alice", (entry("Topic:a*", "Pub", "Sub", decision="Deny", ips=("10.0.0.1",)),))
    assert acl.to_json() == {
        "subject": "User:alice",
        "policies": [
            {
                "policyType": "Custom",
                "entries": [
                    {
                        "resource": "Topic:a*",
                        "actions": ["Pub", "Sub"],
                        "sourceIps": ["10.0.0.1"],
                        "decision": "Deny",
                    }
                ],
            }
        ],
    }
    assert Acl.from_json(acl.to_json()) == acl


def test_merging_replaces_the_entry_of_the_same_resource() -> None:
    acl = Acl("User:a", (entry("Topic:x", "Pub"), entry("Topic:y", "Sub")))
    merged = acl.merged([entry("Topic:x", "Sub", decision="Deny")])
    assert [e.resource.key for e in merged.entries] == ["Topic:y", "Topic:x"]
    assert merged.entries[1].decision is Decision.DENY
    assert [e.resource.key for e in merged.without([Resource.parse("Topic:y")]).entries] == [
        "Topic:x"
    ]
