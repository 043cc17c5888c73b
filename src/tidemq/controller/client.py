"""A broker's side of the controller: heartbeats to every controller, the rest to the leader.

RocketMQ's broker (ReplicasManager, BrokerOuterAPI) beats to the controller
every brokerHeartbeatInterval and sends register, elect and alter requests
to the controller leader. tidemq's broker beats to every controller (so any
of them, once leader, knows who is alive) and finds the leader by asking
each address in turn until one does not answer CONTROLLER_NOT_LEADER; it
remembers that one and asks it first next time.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import RemotingClient, RemotingError

__all__ = ["ControllerClient", "MasterInfo", "NoController"]

log = logging.getLogger("tidemq.controller")

CALL_TIMEOUT_S = 3.0


class NoController(Exception):
    """No controller answered as leader; the text says what each said."""


@dataclass(frozen=True, slots=True)
class MasterInfo:
    """Who the controller says is master (GetReplicaInfoResponseHeader)."""

    master_id: int | None
    address: str | None
    ha_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    @classmethod
    def of(cls, fields: Mapping[str, str], body: bytes = b"") -> MasterInfo:
        """From a reply's header fields and, for GET_REPLICA_INFO, its SyncStateSet body."""
        raw_id = fields.get("masterBrokerId")
        members: frozenset[int] = frozenset()
        members_epoch = int(fields.get("syncStateSetEpoch") or 0)
        if body:
            try:
                document = json.loads(body)
                members = frozenset(int(i) for i in document["syncStateSet"])
                members_epoch = int(document["syncStateSetEpoch"])
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable SyncStateSet from the controller: %r", body[:200])
        return cls(
            int(raw_id) if raw_id not in (None, "") else None,
            fields.get("masterAddress") or None,
            fields.get("masterHaAddress") or None,
            int(fields.get("masterEpoch") or 0),
            members,
            members_epoch,
        )


class ControllerClient:
    def __init__(self, addresses: Sequence[str], client: RemotingClient) -> None:
        self.addresses = list(addresses)
        self.client = client
        self._leader: str | None = None

    async def heartbeat(self, fields: Mapping[str, str]) -> int:
        """BROKER_HEARTBEAT to every controller; how many took it."""
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, dict(fields))

        async def one(address: str) -> bool:
            try:
                response = await self.client.invoke(address, request, CALL_TIMEOUT_S)
            except (RemotingError, ValueError):
                return False
            return response.code == ResponseCode.SUCCESS

        results = await asyncio.gather(*(one(a) for a in self.addresses))
        return sum(results)

    async def call_leader(
        self, code: int, fields: Mapping[str, str], body: bytes = b""
    ) -> RemotingCommand:
        """The leader's answer to a request; NoController when none answers as leader."""
        order = sorted(self.addresses, key=lambda a: a != self._leader)
        problems: list[str] = []
        for address in order:
            request = RemotingCommand.request(code, dict(fields), body)
            try:
                response = await self.client.invoke(address, request, CALL_TIMEOUT_S)
            except (RemotingError, ValueError) as exc:
                problems.append(f"{address}: {exc}")
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                problems.append(f"{address}: {response.remark}")
                continue
            self._leader = address
            return response
        self._leader = None
        raise NoController("; ".join(problems) or "no controller address")

    async def replica_info(self, broker_name: str) -> MasterInfo | None:
        """The master as any controller sees it (the leader first); None if unknown."""
        response = await self.call_leader(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": broker_name}
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return MasterInfo.of(response.ext_fields, response.body)
