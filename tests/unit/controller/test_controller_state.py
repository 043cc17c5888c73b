"""The controller's state machine: RocketMQ 5's election rules as properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.controller.state import (
    ControllerState,
    LiveInfo,
    decide_alter_sync_state_set,
    decide_elect,
    decide_register,
    elect_policy,
    sets_needing_election,
)
from tidemq.protocol.codes import ResponseCode

NAME = "broker-a"


def registered(*ids: int) -> ControllerState:
    state = ControllerState()
    for i in ids:
        decision = decide_register(state, "C", NAME, i, f"h:{i}", f"h:{i + 100}", lambda n, j: True)
        assert decision.ok and decision.event is not None
        assert state.apply(decision.event)
    return state


def everyone_alive(name: str, i: int) -> bool:
    return True


def no_info(i: int) -> LiveInfo:
    return LiveInfo()


def test_first_master_is_whoever_asks_first() -> None:
    state = registered(1, 2)
    decision = decide_elect(state, NAME, everyone_alive, no_info, requester=2)
    assert decision.ok and decision.event is not None
    assert state.apply(decision.event)
    found = state.sets[NAME]
    assert (found.master_id, found.master_epoch, found.sync_state_set) == (2, 1, {2})
    assert decision.fields["masterAddress"] == "h:2"
    assert decision.fields["masterHaAddress"] == "h:102"


def test_a_live_master_is_kept() -> None:
    state = registered(1, 2)
    event = decide_elect(state, NAME, everyone_alive, no_info, requester=1).event
    assert event is not None and state.apply(event)
    again = decide_elect(state, NAME, everyone_alive, no_info, requester=2)
    assert again.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert again.event is None and again.fields["masterBrokerId"] == "1"


def test_only_the_sync_state_set_is_electable_unless_unclean() -> None:
    state = registered(1, 2)
    assert state.apply(decide_elect(state, NAME, everyone_alive, no_info, requester=1).event or {})

    # 2 never joined the SyncStateSet: the master dies, nobody may take over
    def master_dead(name: str, i: int) -> bool:
        return i != 1

    assert sets_needing_election(state, master_dead) == [NAME]
    decision = decide_elect(state, NAME, master_dead, no_info)
    assert decision.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    unclean = decide_elect(state, NAME, master_dead, no_info, unclean=True)
    assert unclean.ok and unclean.fields["masterBrokerId"] == "2"


def test_a_stale_master_is_fenced_from_altering_the_set() -> None:
    state = registered(1, 2)
    assert state.apply(decide_elect(state, NAME, everyone_alive, no_info, requester=1).event or {})
    grow = decide_alter_sync_state_set(state, NAME, 1, 1, frozenset({1, 2}), 1, everyone_alive)
    assert grow.ok and grow.event is not None and state.apply(grow.event)
    assert state.sets[NAME].sync_state_set == {1, 2}
    elected = decide_elect(state, NAME, lambda n, i: i == 2, no_info)
    assert elected.ok and elected.event is not None and state.apply(elected.event)
    stale = decide_alter_sync_state_set(state, NAME, 1, 1, frozenset({1}), 2, everyone_alive)
    assert stale.code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert not state.apply(grow.event)  # replaying an old event changes nothing


def test_the_policy_ranks_by_epoch_offset_then_priority() -> None:
    infos = {
        1: LiveInfo(epoch=2, max_offset=100),
        2: LiveInfo(epoch=3, max_offset=10),
        3: LiveInfo(epoch=3, max_offset=10, election_priority=1),
    }
    assert elect_policy({1, 2, 3}, None, None, None, lambda i: True, infos.__getitem__) == 3
    assert elect_policy({1, 2}, None, None, None, lambda i: True, infos.__getitem__) == 2
    assert elect_policy({1, 2}, None, 1, None, lambda i: True, infos.__getitem__) == 1
    assert elect_policy({1, 2}, None, None, 1, lambda i: i == 2, infos.__getitem__) is None


# -- properties over random histories -----------------------------------------------------

IDS = st.integers(min_value=0, max_value=4)
STEP = st.one_of(
    st.tuples(st.just("register"), IDS),
    st.tuples(st.just("elect"), st.frozensets(IDS), st.none() | IDS, st.booleans()),
    st.tuples(st.just("alter"), st.frozensets(IDS), st.frozensets(IDS), st.booleans()),
)


def run(steps: list[tuple[object, ...]]) -> tuple[ControllerState, list[dict[str, object]]]:
    """Play a random history; return the state and the applied events, checking
    the invariants after every step."""
    state = ControllerState()
    log: list[dict[str, object]] = []
    for step in steps:
        before = state.as_dict()
        event = None
        if step[0] == "register":
            i = int(step[1])  # type: ignore[call-overload]
            event = decide_register(state, "C", NAME, i, f"h:{i}", f"h:{i}", everyone_alive).event
            replaced_sss = None
        elif step[0] == "elect":
            _, live, requester, unclean = step
            assert isinstance(live, frozenset)

            def alive(name: str, i: int, live: frozenset[int] = live) -> bool:
                return i in live

            old_sss = state.sets[NAME].sync_state_set if NAME in state.sets else frozenset()
            decision = decide_elect(
                state, NAME, alive, no_info, requester=requester, unclean=bool(unclean)
            )  # type: ignore[arg-type]
            event = decision.event
            replaced_sss = (old_sss, unclean, NAME in state.sets and state.sets[NAME].master_epoch)
        else:
            _, live, new_set, stale = step
            assert isinstance(live, frozenset) and isinstance(new_set, frozenset)
            found = state.sets.get(NAME)
            if found is None or found.master_id is None:
                continue
            decision = decide_alter_sync_state_set(
                state,
                NAME,
                found.master_id,
                found.master_epoch - (1 if stale else 0),
                new_set | {found.master_id},
                found.sync_state_set_epoch,
                lambda n, i, live=live: i in live,
            )
            if stale:
                assert decision.code in (
                    ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                    ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                )
            event = decision.event
            replaced_sss = None
        if event is None:
            assert state.as_dict() == before
            continue
        assert state.apply(event)
        log.append(event)
        found = state.sets[NAME]
        old = before.get(NAME)
        if old is not None:
            assert found.master_epoch >= old["masterEpoch"]
            assert found.sync_state_set_epoch >= old["syncStateSetEpoch"]
        if found.master_id is not None:
            assert found.master_id in found.sync_state_set
        assert found.sync_state_set <= found.replicas.keys()
        if event["type"] == "elect" and replaced_sss is not None:
            old_sss, unclean, old_epoch = replaced_sss
            new = event["newMaster"]
            if new is not None and old_epoch and not unclean:
                # the safety rule: a clean election only picks an in-sync replica
                assert new in old_sss
        # a replayed (stale) event never applies twice
        if event["type"] != "register":
            assert not state.apply(event)
    return state, log


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=40))
def test_invariants_hold_over_any_history(steps: list[tuple[object, ...]]) -> None:
    run(steps)


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP, max_size=40))
def test_replaying_the_log_rebuilds_the_same_state(steps: list[tuple[object, ...]]) -> None:
    state, log = run(steps)
    replica = ControllerState()
    for event in log:
        assert replica.apply(event)
    assert replica.as_dict() == state.as_dict()
    assert ControllerState.from_dict(state.as_dict()).as_dict() == state.as_dict()


@settings(max_examples=200, deadline=None)
@given(st.lists(STEP, max_size=30), st.frozensets(IDS))
def test_master_epochs_only_grow_and_every_election_bumps_them(
    steps: list[tuple[object, ...]], live: frozenset[int]
) -> None:
    state, _ = run(steps)
    found = state.sets.get(NAME)
    if found is None:
        return
    before = found.master_epoch
    decision = decide_elect(state, NAME, lambda n, i: i in live, no_info)
    if decision.event is not None:
        assert state.apply(decision.event)
        assert state.sets[NAME].master_epoch == before + 1
        new = decision.event["newMaster"]
        assert new is None or (new in live and new in found.sync_state_set | {new})
    else:
        assert state.sets[NAME].master_epoch == before
