"""The controller as a remoting service: RocketMQ's controller request codes over the state machine.

========  ===============================  ===================================================
code      request                          answer
========  ===============================  ===================================================
904       BROKER_HEARTBEAT                 SUCCESS (liveness, epoch and offset recorded)
1001      CONTROLLER_ALTER_SYNC_STATE_SET  newSyncStateSetEpoch, or 2000/2001/2002 when fenced
1002      CONTROLLER_ELECT_MASTER          the master (masterBrokerId, masterAddress, epochs)
1003      CONTROLLER_REGISTER_BROKER       the current master, if one is alive
1004      CONTROLLER_GET_REPLICA_INFO      the master + body SyncStateSet JSON
1005      CONTROLLER_GET_METADATA_INFO     this controller's Raft view (leader, peers, term)
1006      CONTROLLER_GET_SYNC_STATE_DATA   every broker set, as JSON
========  ===============================  ===================================================

Requests that change the state (1001, 1002, 1003) are decided on the
leader and committed through Raft before they are answered; a controller
that is not the leader answers CONTROLLER_NOT_LEADER (2007) and the broker
tries the next address. Reads are answered by any controller from its
replica of the state. The leader also scans every `scan_interval_s` for
broker sets whose master stopped beating and elects a new one
(ControllerManager.scanInactiveMasterAndTriggerReelect /
DefaultBrokerHeartbeatManager.scanNotActiveBroker). Brokers beat to every
controller, so a follower that becomes leader already knows who is alive;
a controller that just started waits `STARTUP_GRACE_S` for their beats.

Header names are Java's (RegisterSuccessRequestHeader, ElectMasterRequestHeader,
AlterSyncStateSetRequestHeader, GetReplicaInfoRequestHeader,
BrokerHeartbeatRequestHeader); replies add ``masterHaAddress`` (tidemq's:
where a slave copies from). The body of 1001 and 1004 is Java's SyncStateSet,
``{"syncStateSet": [ids], "syncStateSetEpoch": n}``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import Connection, Handler

from .config import ControllerConfig
from .liveness import DEFAULT_HEARTBEAT_TIMEOUT_MS, LiveTable
from .raft import ProposalFailed, RaftLog
from .state import (
    Decision,
    LiveInfo,
    decide_alter_sync_state_set,
    decide_elect,
    decide_register,
    master_fields,
    sets_needing_election,
)

__all__ = ["Controller"]

log = logging.getLogger("tidemq.controller")

STARTUP_GRACE_S = 3.0
"""A controller judges no master dead in its first seconds: brokers beat to
every controller every second, so by then it has heard from the live ones."""


class BadRequest(ValueError):
    """A header is missing or malformed: CONTROLLER_INVALID_REQUEST with the reason."""


def _text(fields: Mapping[str, str], name: str) -> str:
    value = fields.get(name)
    if value is None or value == "":
        raise BadRequest(f"the header field {name} is missing")
    return value


def _int(fields: Mapping[str, str], name: str, default: int | None = None) -> int:
    value = fields.get(name)
    if value is None or value == "":
        if default is not None:
            return default
        raise BadRequest(f"the header field {name} is missing")
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"the header field {name} is not a number: {value!r}") from None


def _sync_state_set_body(body: bytes) -> tuple[frozenset[int], int]:
    try:
        document = json.loads(body)
        members = frozenset(int(i) for i in document["syncStateSet"])
        return members, int(document["syncStateSetEpoch"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRequest(f"the body is not a SyncStateSet: {exc}") from None


class Controller:
    """One controller: its Raft replica, its heartbeat table, its handlers."""

    def __init__(
        self,
        config: ControllerConfig,
        clock: Clock = SYSTEM_CLOCK,
        *,
        raft: RaftLog | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.raft = raft if raft is not None else RaftLog(config)
        self.live = LiveTable(clock)
        self.elections = 0
        """Masters this controller elected as leader, since start."""
        self._started_at = clock.monotonic()
        self._tasks = TaskSet("controller")

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._started_at = self.clock.monotonic()
        self._tasks.spawn(self._scan_loop())
        log.info(
            "controller started: raft %s, peers %s, data %s",
            self.config.raft_address,
            ",".join(self.config.partners) or "none",
            self.config.data_dir,
        )

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        await asyncio.to_thread(self.raft.close)

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.BROKER_HEARTBEAT: self._wrap(self._heartbeat),
            RequestCode.CONTROLLER_REGISTER_BROKER: self._wrap(self._leader_only(self._register)),
            RequestCode.CONTROLLER_ELECT_MASTER: self._wrap(self._leader_only(self._elect)),
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._wrap(self._leader_only(self._alter)),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._wrap(self._replica_info),
            RequestCode.CONTROLLER_GET_METADATA_INFO: self._wrap(self._metadata),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._wrap(self._sync_state_data),
        }

    @staticmethod
    def _wrap(handle: Callable[[RemotingCommand], Awaitable[RemotingCommand]]) -> Handler:
        async def handler(request: RemotingCommand, connection: Connection) -> RemotingCommand:
            try:
                return await handle(request)
            except BadRequest as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)
                )

        return handler

    # -- helpers --------------------------------------------------------------------------

    def _alive(self, broker_name: str, broker_id: int) -> bool:
        return self.live.alive(broker_name, broker_id)

    def _leader_only(
        self, handle: Callable[[RemotingCommand], Awaitable[RemotingCommand]]
    ) -> Callable[[RemotingCommand], Awaitable[RemotingCommand]]:
        """A request that changes the state: only the leader decides it."""

        async def handler(request: RemotingCommand) -> RemotingCommand:
            if self.raft.is_leader():
                return await handle(request)
            leader = self.raft.leader()
            return RemotingCommand.response_to(
                request,
                ResponseCode.CONTROLLER_NOT_LEADER,
                f"this controller ({self.config.raft_address}) is not the leader; "
                f"the leader is {leader or 'not elected yet'}",
            )

        return handler

    async def _commit(self, request: RemotingCommand, decision: Decision) -> RemotingCommand:
        """Put the decision's event through Raft, then answer as it says."""
        if decision.event is not None:
            try:
                applied = await self.raft.propose(decision.event)
            except ProposalFailed as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.CONTROLLER_NOT_LEADER, f"not committed: {exc}"
                )
            if not applied:
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
                    if decision.event["type"] == "elect"
                    else ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                    "the state changed while the request was decided: ask again",
                )
        return RemotingCommand.response_to(request, decision.code, decision.remark, decision.fields)

    # -- handlers -------------------------------------------------------------------------

    async def _heartbeat(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        name = _text(fields, "brokerName")
        broker_id = _int(fields, "brokerId")
        self.live.beat(
            name,
            broker_id,
            _text(fields, "brokerAddr"),
            _int(fields, "heartbeatTimeoutMills", DEFAULT_HEARTBEAT_TIMEOUT_MS),
            LiveInfo(
                epoch=_int(fields, "epoch", 0),
                max_offset=_int(fields, "maxOffset", 0),
                election_priority=_int(fields, "electionPriority", 2**31 - 1),
            ),
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def _register(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        address = _text(fields, "brokerAddress")
        with self.raft.lock:
            decision = decide_register(
                self.raft.state,
                _text(fields, "clusterName"),
                _text(fields, "brokerName"),
                _int(fields, "brokerId"),
                address,
                fields.get("haAddress") or address,
                self._alive,
            )
        return await self._commit(request, decision)

    async def _elect(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        name = _text(fields, "brokerName")
        requester = fields.get("brokerId")
        with self.raft.lock:
            decision = decide_elect(
                self.raft.state,
                name,
                self._alive,
                lambda i: self.live.info(name, i),
                requester=int(requester) if requester not in (None, "") else None,
                force=fields.get("designateElect", "false").lower() == "true",
                unclean=self.config.elect_unclean,
            )
        response = await self._commit(request, decision)
        if response.code == ResponseCode.SUCCESS and decision.event is not None:
            self.elections += 1
            log.warning(
                "broker set %s: replica %s elected master (epoch %s), asked by replica %s",
                name,
                decision.fields.get("masterBrokerId"),
                decision.fields.get("masterEpoch"),
                requester,
            )
        return response

    async def _alter(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        members, based_on = _sync_state_set_body(request.body)
        with self.raft.lock:
            decision = decide_alter_sync_state_set(
                self.raft.state,
                _text(fields, "brokerName"),
                _int(fields, "masterBrokerId"),
                _int(fields, "masterEpoch"),
                members,
                based_on,
                self._alive,
            )
        response = await self._commit(request, decision)
        if response.code == ResponseCode.SUCCESS:
            log.info(
                "broker set %s: SyncStateSet is now %s (epoch %s)",
                fields.get("brokerName"),
                sorted(members),
                decision.fields.get("newSyncStateSetEpoch"),
            )
        return response

    async def _replica_info(self, request: RemotingCommand) -> RemotingCommand:
        name = _text(request.ext_fields, "brokerName")
        with self.raft.lock:
            found = self.raft.state.sets.get(name)
            if found is None:
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                    "Broker metadata is not existed",
                )
            fields = master_fields(found)
            body = json.dumps(
                {
                    "syncStateSet": sorted(found.sync_state_set),
                    "syncStateSetEpoch": found.sync_state_set_epoch,
                }
            ).encode()
        fields["isLeader"] = str(self.raft.is_leader()).lower()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, fields, body)

    async def _metadata(self, request: RemotingCommand) -> RemotingCommand:
        status = self.raft.status()
        fields = {
            "controllerLeaderId": str(status["leader"] or ""),
            "controllerLeaderAddress": str(status["leader"] or ""),
            "isLeader": str(status["isLeader"]).lower(),
            "peers": ";".join([self.config.raft_address, *self.config.partners]),
        }
        body = json.dumps(status).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, fields, body)

    async def _sync_state_data(self, request: RemotingCommand) -> RemotingCommand:
        with self.raft.lock:
            document = self.raft.state.as_dict()
        for name, found in document.items():
            found["alive"] = sorted(
                int(i) for i in found["replicas"] if self.live.alive(name, int(i))
            )
        body = json.dumps(document).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, None, body)

    # -- the leader's scan ----------------------------------------------------------------

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_interval_s)
            try:
                await self.scan_now()
            except Exception:
                log.exception("controller scan failed")

    async def scan_now(self) -> list[str]:
        """One pass of the leader: elect a master for every broker set whose
        master died; the names of those it elected one for."""
        for name, broker_id, address in self.live.forget_dead():
            log.warning("replica %s of %s (%s) stopped beating", broker_id, name, address)
        if not self.raft.is_leader():
            return []
        if self.clock.monotonic() - self._started_at < STARTUP_GRACE_S:
            return []  # brokers beat to every controller: a fresh one waits for their beats
        with self.raft.lock:
            names = sets_needing_election(self.raft.state, self._alive)
        elected: list[str] = []
        for name in names:
            with self.raft.lock:
                decision = decide_elect(
                    self.raft.state,
                    name,
                    self._alive,
                    functools.partial(self.live.info, name),
                    unclean=self.config.elect_unclean,
                )
            if decision.event is None:
                continue
            try:
                applied = await self.raft.propose(decision.event)
            except ProposalFailed as exc:
                log.warning("broker set %s: election not committed: %s", name, exc)
                continue
            if applied and decision.ok:
                self.elections += 1
                elected.append(name)
                log.warning(
                    "broker set %s: master down, replica %s elected (epoch %s)",
                    name,
                    decision.fields["masterBrokerId"],
                    decision.fields["masterEpoch"],
                )
            elif applied:
                log.warning("broker set %s: %s", name, decision.remark)
        return elected
