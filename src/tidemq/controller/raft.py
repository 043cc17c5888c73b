"""The Raft glue: the controller's events replicated and made durable by pysyncobj.

pysyncobj (a maintained Raft implementation in pure Python) runs its own
thread. Every controller holds a `ReplicatedState`, whose one replicated
method applies an event of the pure state machine (`state.ControllerState`);
an event counts once a majority of the controllers have it in their journal
(``<controller_dir>/raft.journal``, replayed at start; compacted into
``raft.dump``). With one controller it is its own majority. The journal is
written through a shared mapping of the file: it survives the process being
killed, and Raft's majority covers the loss of a machine.

This is the only module that knows pysyncobj: the rest of the controller
sees `RaftLog.state`, `RaftLog.is_leader` and `await RaftLog.propose(event)`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from .config import ControllerConfig
from .state import ControllerState, Event

__all__ = ["ProposalFailed", "RaftLog"]

log = logging.getLogger("tidemq.controller")


class ProposalFailed(Exception):
    """An event was not committed: no leader, no majority, or no answer in time."""


class ReplicatedState(SyncObjConsumer):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.state = ControllerState()

    @replicated  # type: ignore[untyped-decorator]
    def apply_event(self, event: Event) -> bool:
        with self.lock:
            return self.state.apply(event)

    def _serialize(self) -> dict[str, Any]:
        with self.lock:
            return self.state.as_dict()

    def _deserialize(self, data: dict[str, Any]) -> None:
        with self.lock:
            self.state = ControllerState.from_dict(data)


class RaftLog:
    def __init__(self, config: ControllerConfig) -> None:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self._replicated = ReplicatedState()
        conf = SyncObjConf(
            journalFile=str(config.data_dir / "raft.journal"),
            fullDumpFile=str(config.data_dir / "raft.dump"),
            commandsWaitLeader=False,
            dynamicMembershipChange=False,
            connectionRetryTime=1.0,
        )
        self._sync = SyncObj(
            config.raft_address, list(config.partners), conf, consumers=[self._replicated]
        )

    @property
    def state(self) -> ControllerState:
        return self._replicated.state

    @property
    def lock(self) -> threading.Lock:
        """Held while an event applies: read the state under it."""
        lock: threading.Lock = self._replicated.lock
        return lock

    def is_leader(self) -> bool:
        return bool(self._sync._isLeader())

    def leader(self) -> str | None:
        node = self._sync._getLeader()
        return None if node is None else str(node.address if hasattr(node, "address") else node)

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self._sync.getStatus()
        return {
            "self": self.config.raft_address,
            "leader": self.leader(),
            "isLeader": self.is_leader(),
            "term": status.get("raft_term"),
            "commitIndex": status.get("commit_idx"),
            "peers": list(self.config.partners),
        }

    async def propose(self, event: Event, timeout_s: float = 3.0) -> bool:
        """Commit `event` through Raft; whether it applied (False: stale)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()

        def answered(result: object, error: int) -> None:
            def settle() -> None:
                if done.done():
                    return
                if error == FAIL_REASON.SUCCESS:
                    done.set_result(bool(result))
                else:
                    done.set_exception(ProposalFailed(_REASONS.get(error, f"raft error {error}")))

            loop.call_soon_threadsafe(settle)

        self._replicated.apply_event(event, callback=answered)
        try:
            async with asyncio.timeout(timeout_s):
                return await done
        except TimeoutError:
            raise ProposalFailed(
                f"not committed within {timeout_s:.1f} s (no majority of the controllers?)"
            ) from None

    def close(self) -> None:
        self._sync.destroy()


_REASONS = {
    FAIL_REASON.QUEUE_FULL: "the Raft queue is full",
    FAIL_REASON.MISSING_LEADER: "no controller leader (no majority reachable)",
    FAIL_REASON.DISCARDED: "discarded by a new leader",
    FAIL_REASON.NOT_LEADER: "this controller is not the leader",
    FAIL_REASON.LEADER_CHANGED: "the leader changed",
    FAIL_REASON.REQUEST_DENIED: "denied",
}
