"""The controller's state machine, pure: broker sets, their masters, epochs and SyncStateSets.

RocketMQ 5's controller (apache/rocketmq, controller/.../impl/manager/
ReplicasInfoManager, SyncStateInfo, BrokerReplicaInfo) keeps, per broker name:
the replicas (id -> address), the master's id, the master epoch, the
SyncStateSet (the replicas that have every acknowledged message) and its
epoch. Requests are checked against the state and turned into *events*; only
events change the state, and they are what the Raft log holds, so every
controller that applies the same log holds the same state.

Two differences from Java, both for the replicated log:

* an event carries the epochs it was decided against, and `apply` refuses
  it when they moved on (Java serialises check-then-apply on the leader's
  one event thread; here two proposals decided on the same state cannot
  both win, whoever proposes them);
* a replica's id is the broker's configured `broker_id` (Java hands ids out
  with CONTROLLER_GET_NEXT_BROKER_ID / CONTROLLER_APPLY_BROKER_ID): a
  register event adds the replica or updates its addresses.

Epochs follow SyncStateInfo: electing a master (or finding none) adds one to
the master epoch; a new master or a new SyncStateSet adds one to the
SyncStateSet epoch. A new master's SyncStateSet is itself alone
(ReplicasInfoManager.handleElectMaster); the master grows it again as slaves
catch up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemq.protocol.codes import ResponseCode

__all__ = [
    "BrokerSet",
    "ControllerState",
    "Decision",
    "LiveInfo",
    "Replica",
    "decide_alter_sync_state_set",
    "decide_elect",
    "decide_register",
    "elect_policy",
    "sets_needing_election",
]

Event = dict[str, Any]
"""A state change as the Raft log holds it: JSON-like, `type` says which."""


@dataclass(slots=True)
class Replica:
    broker_id: int
    address: str
    """The broker's remoting address (what clients dial)."""
    ha_address: str
    """Its HA port: where slaves copy the commitlog from when it is master."""


@dataclass(slots=True)
class BrokerSet:
    """One broker name's replicas (BrokerReplicaInfo + SyncStateInfo)."""

    cluster: str
    broker_name: str
    replicas: dict[int, Replica] = field(default_factory=dict)
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "replicas": {
                str(r.broker_id): {"address": r.address, "haAddress": r.ha_address}
                for r in sorted(self.replicas.values(), key=lambda r: r.broker_id)
            },
            "masterBrokerId": self.master_id,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BrokerSet:
        return cls(
            cluster=raw["cluster"],
            broker_name=raw["brokerName"],
            replicas={
                int(k): Replica(int(k), v["address"], v["haAddress"])
                for k, v in raw["replicas"].items()
            },
            master_id=raw["masterBrokerId"],
            master_epoch=int(raw["masterEpoch"]),
            sync_state_set=frozenset(int(i) for i in raw["syncStateSet"]),
            sync_state_set_epoch=int(raw["syncStateSetEpoch"]),
        )

    @property
    def master(self) -> Replica | None:
        return None if self.master_id is None else self.replicas.get(self.master_id)


class ControllerState:
    """Every broker set the controller knows; changed only by `apply`."""

    def __init__(self) -> None:
        self.sets: dict[str, BrokerSet] = {}

    def as_dict(self) -> dict[str, Any]:
        return {name: s.as_dict() for name, s in sorted(self.sets.items())}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ControllerState:
        state = cls()
        state.sets = {name: BrokerSet.from_dict(value) for name, value in raw.items()}
        return state

    def apply(self, event: Event) -> bool:
        """Apply one event of the log; False (nothing changed) when the state
        moved on since it was decided (its epochs are stale) or it names a
        broker set that is not there."""
        kind = event.get("type")
        if kind == "register":
            return self._apply_register(event)
        found = self.sets.get(str(event.get("brokerName")))
        if found is None:
            return False
        if kind == "elect":
            return _apply_elect(found, event)
        if kind == "alterSyncStateSet":
            return _apply_alter(found, event)
        return False

    def _apply_register(self, event: Event) -> bool:
        name = event["brokerName"]
        found = self.sets.get(name)
        if found is None:
            found = self.sets[name] = BrokerSet(event["cluster"], name)
        broker_id = int(event["brokerId"])
        found.replicas[broker_id] = Replica(broker_id, event["address"], event["haAddress"])
        return True


def _apply_elect(found: BrokerSet, event: Event) -> bool:
    if event["expectedMasterEpoch"] != found.master_epoch:
        return False
    new_master = event["newMaster"]
    found.master_epoch += 1
    if new_master is None:
        found.master_id = None  # the SyncStateSet stays: its members are the candidates
        return True
    if new_master not in found.replicas:
        found.master_epoch -= 1
        return False
    found.master_id = new_master
    found.sync_state_set = frozenset({new_master})
    found.sync_state_set_epoch += 1
    return True


def _apply_alter(found: BrokerSet, event: Event) -> bool:
    new_set = frozenset(int(i) for i in event["syncStateSet"])
    if (
        event["masterBrokerId"] != found.master_id
        or event["masterEpoch"] != found.master_epoch
        or event["syncStateSetEpoch"] != found.sync_state_set_epoch
        or found.master_id not in new_set
        or not new_set <= found.replicas.keys()
    ):
        return False
    found.sync_state_set = new_set
    found.sync_state_set_epoch += 1
    return True


# -- decisions: a request and the state in, an answer and maybe an event out ----------------


@dataclass(frozen=True, slots=True)
class Decision:
    """What to answer, and the event to put in the log first (if any)."""

    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    event: Event | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What a replica's latest heartbeat said (BrokerLiveInfo): the election's ranking."""

    epoch: int = 0
    """The last master epoch in its commitlog (its epoch file's last entry)."""
    max_offset: int = 0
    """The end of its commitlog."""
    election_priority: int = 2**31 - 1
    """Lower wins (brokerElectionPriority, default Integer.MAX_VALUE)."""


Alive = Callable[[str, int], bool]
"""(broker name, replica id) -> whether its heartbeats are current."""


def decide_register(
    state: ControllerState,
    cluster: str,
    broker_name: str,
    broker_id: int,
    address: str,
    ha_address: str,
    alive: Alive,
) -> Decision:
    """CONTROLLER_REGISTER_BROKER: record the replica (or its new addresses)
    and tell it the master, if one is there and alive
    (ReplicasInfoManager.registerSuccess)."""
    if broker_id < 0:
        return Decision(ResponseCode.CONTROLLER_INVALID_REQUEST, f"brokerId {broker_id} < 0")
    found = state.sets.get(broker_name)
    if found is not None and found.cluster != cluster:
        return Decision(
            ResponseCode.CONTROLLER_INVALID_REQUEST,
            f"broker name {broker_name} belongs to cluster {found.cluster}, not {cluster}",
        )
    event: Event | None = {
        "type": "register",
        "cluster": cluster,
        "brokerName": broker_name,
        "brokerId": broker_id,
        "address": address,
        "haAddress": ha_address,
    }
    known = found.replicas.get(broker_id) if found is not None else None
    if known is not None and (known.address, known.ha_address) == (address, ha_address):
        event = None
    fields: dict[str, str] = {}
    if found is not None:
        fields = master_fields(found, alive)
    return Decision(fields=fields, event=event)


def master_fields(found: BrokerSet, alive: Alive | None = None) -> dict[str, str]:
    """The response fields naming the master (none when there is none, or it is not alive)."""
    fields = {
        "masterEpoch": str(found.master_epoch),
        "syncStateSetEpoch": str(found.sync_state_set_epoch),
    }
    master = found.master
    if master is not None and (alive is None or alive(found.broker_name, master.broker_id)):
        fields["masterBrokerId"] = str(master.broker_id)
        fields["masterAddress"] = master.address
        fields["masterHaAddress"] = master.ha_address
    return fields


def elect_policy(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    old_master: int | None,
    preferred: int | None,
    alive: Callable[[int], bool],
    info: Callable[[int], LiveInfo],
) -> int | None:
    """DefaultElectPolicy.elect: try the SyncStateSet, then (unclean election
    allowed) every replica. Among the alive ones: the old master if it is
    still alive and nothing else is preferred; the preferred one if alive;
    else the best by (epoch desc, max offset desc, priority asc), ties by
    the lowest id (Java's TreeSet keeps the first equal; this makes it
    deterministic)."""
    for pool in (sync_state_set, all_replicas):
        if pool is None:
            continue
        candidates = sorted(i for i in set(pool) if alive(i))
        if not candidates:
            continue
        if old_master in candidates and preferred in (None, old_master):
            return old_master
        if preferred is not None:
            return preferred if preferred in candidates else None

        def rank(i: int) -> tuple[int, int, int, int]:
            live = info(i)
            return (-live.epoch, -live.max_offset, live.election_priority, i)

        return min(candidates, key=rank)
    return None


def decide_elect(
    state: ControllerState,
    broker_name: str,
    alive: Alive,
    info: Callable[[int], LiveInfo],
    *,
    requester: int | None = None,
    force: bool = False,
    unclean: bool = False,
) -> Decision:
    """CONTROLLER_ELECT_MASTER (ReplicasInfoManager.electMaster): from a
    broker (`requester`; with `force`, it asks to be the master), or from the
    controller's own scan (`requester` None) when the master died."""
    found = state.sets.get(broker_name)
    if found is None:
        return Decision(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"broker set {broker_name} has not been registered",
        )
    old_master = found.master_id
    new_master: int | None = None
    if found.master_epoch == 0 and requester is not None and requester in found.replicas:
        new_master = requester  # the first master of a broker set: whoever asks first
    else:
        new_master = elect_policy(
            found.sync_state_set,
            found.replicas.keys() if unclean else None,
            old_master,
            requester if force else None,
            lambda i: i in found.replicas and alive(broker_name, i),
            info,
        )
    if new_master is not None and new_master == old_master:
        fields = master_fields(found)
        return Decision(
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
            f"the master {old_master} of {broker_name} is still alive: no election",
            fields,
        )
    event: Event = {
        "type": "elect",
        "brokerName": broker_name,
        "newMaster": new_master,
        "expectedMasterEpoch": found.master_epoch,
    }
    if new_master is not None:
        replica = found.replicas[new_master]
        return Decision(
            fields={
                "masterBrokerId": str(new_master),
                "masterAddress": replica.address,
                "masterHaAddress": replica.ha_address,
                "masterEpoch": str(found.master_epoch + 1),
                "syncStateSetEpoch": str(found.sync_state_set_epoch + 1),
            },
            event=event,
        )
    if requester is None:
        if old_master is None:
            return Decision(
                ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"{broker_name} has no master and none of its SyncStateSet is alive",
            )
        return Decision(
            ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
            f"the master of {broker_name} is down and no replica of its SyncStateSet "
            f"{sorted(found.sync_state_set)} is alive to take over",
            event=event,
        )
    return Decision(
        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
        f"no replica of {broker_name}'s SyncStateSet {sorted(found.sync_state_set)} can be elected",
    )


def decide_alter_sync_state_set(
    state: ControllerState,
    broker_name: str,
    master_id: int,
    master_epoch: int,
    new_set: frozenset[int],
    new_set_based_on_epoch: int,
    alive: Alive,
) -> Decision:
    """CONTROLLER_ALTER_SYNC_STATE_SET (ReplicasInfoManager.alterSyncStateSet):
    only the current master, at the current master epoch and SyncStateSet
    epoch, may change the set; every member must be a live replica and the
    master must stay in it. A stale master is answered
    CONTROLLER_FENCED_MASTER_EPOCH: that is how it learns it was replaced."""
    found = state.sets.get(broker_name)
    if found is None:
        return Decision(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"
        )
    if new_set == found.sync_state_set:
        return Decision(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        )
    if found.master_id != master_id:
        return Decision(
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"the current master of {broker_name} is {found.master_id}, not {master_id}",
        )
    if master_epoch != found.master_epoch:
        return Decision(
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"the current master epoch is {found.master_epoch}, not {master_epoch}",
        )
    if new_set_based_on_epoch != found.sync_state_set_epoch:
        return Decision(
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"the current SyncStateSet epoch is {found.sync_state_set_epoch}, "
            f"not {new_set_based_on_epoch}",
        )
    for replica in sorted(new_set):
        if replica not in found.replicas:
            return Decision(
                ResponseCode.CONTROLLER_INVALID_REPLICAS, f"replica {replica} does not exist"
            )
        if not alive(broker_name, replica):
            return Decision(
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, f"replica {replica} is not alive"
            )
    if master_id not in new_set:
        return Decision(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            f"the new SyncStateSet does not hold the master {master_id}",
        )
    return Decision(
        fields={"newSyncStateSetEpoch": str(found.sync_state_set_epoch + 1)},
        event={
            "type": "alterSyncStateSet",
            "brokerName": broker_name,
            "masterBrokerId": master_id,
            "masterEpoch": master_epoch,
            "syncStateSetEpoch": new_set_based_on_epoch,
            "syncStateSet": sorted(new_set),
        },
    )


def sets_needing_election(state: ControllerState, alive: Alive) -> list[str]:
    """The broker sets whose master is gone while some replica is alive
    (ReplicasInfoManager.scanNeedReelectBrokerSets; also a set left without a
    master, which Java leaves to its brokers' own elect requests)."""
    names: list[str] = []
    for name, found in sorted(state.sets.items()):
        if found.master_epoch == 0:
            continue  # no master ever: the first broker to ask becomes it
        if found.master_id is not None and alive(name, found.master_id):
            continue
        if found.master_id is None and not any(alive(name, i) for i in found.sync_state_set):
            continue  # nothing electable yet: asked again when a member comes back
        if any(alive(name, i) for i in found.replicas):
            names.append(name)
    return names
