"""A broker's replication, as the broker process owns it.

Every broker listens on its HA port (RocketMQ's HAService accepts on every
role); a SLAVE also copies its master (`slave.HaClient`, one owned task); a
SYNC_MASTER attaches its `ReplicaWaits` to the store, which then answers each
write once a slave has it. `stop` ends the copy, closes the HA port and its
connections, and answers the writes still waiting (FLUSH_SLAVE_TIMEOUT).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tidemq.common.tasks import TaskSet
from tidemq.ha.config import BrokerRole, HaSettings
from tidemq.ha.master import HaServer
from tidemq.ha.slave import HaClient
from tidemq.ha.sync_state import SyncStateWaits
from tidemq.ha.waits import ReplicaWaits
from tidemq.store.file_store import FileMessageStore

__all__ = ["Replication"]


class Replication:
    def __init__(
        self,
        store: FileMessageStore,
        role: BrokerRole,
        settings: HaSettings,
        *,
        master_address: str | None = None,
        replica_id: int | None = None,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`replica_id` set: controller mode (RocketMQ 5): a master waits for
        its whole SyncStateSet (`sync_state`), a slave says who it is and runs
        `prepare` before each connection."""
        self.store = store
        self.role = role
        self.settings = settings
        self.sync_state: SyncStateWaits | None = None
        self.waits: ReplicaWaits | None = None
        if replica_id is not None and role.is_master:
            self.sync_state = SyncStateWaits(replica_id, timeout_s=settings.slave_timeout_s)
            self.waits = self.sync_state
        elif role is BrokerRole.SYNC_MASTER:
            self.waits = ReplicaWaits(
                timeout_s=settings.slave_timeout_s, max_gap=settings.max_gap_not_in_sync
            )
        self.server = HaServer(store, settings, self.waits, sync_state=self.sync_state)
        self.client = (
            HaClient(
                store,
                settings,
                master_address=master_address,
                replica_id=replica_id,
                prepare=prepare,
            )
            if role is BrokerRole.SLAVE
            else None
        )
        self._tasks = TaskSet("replication")

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, host: str, port: int) -> None:
        await self.server.start(host, port)
        if self.waits is not None:
            self.store.replication = self.waits
        if self.client is not None:
            self._tasks.spawn(self.client.run())

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        self.store.replication = None
        await self.server.stop()

    def learn_master(self, ha_address: str | None) -> None:
        """What the name server says the master's HA address is (a slave listens)."""
        if self.client is not None:
            self.client.learn_master(ha_address)

    def runtime_info(self) -> dict[str, str]:
        """tidemq's replication keys for GET_BROKER_RUNTIME_INFO."""
        info = {
            "tidemqBrokerRole": self.role.value,
            "tidemqHaSlaves": str(len(self.server.connections)),
        }
        if self.sync_state is not None:
            info["tidemqSyncStateSet"] = ",".join(str(i) for i in sorted(self.sync_state.members))
            info["tidemqSyncStateSetEpoch"] = str(self.sync_state.members_epoch)
        if self.waits is not None:
            info["tidemqHaSlaveAckOffset"] = str(self.waits.acked)
            info["tidemqHaFlushSlaveTimeouts"] = str(self.waits.timeouts)
            info["tidemqHaSlaveNotAvailable"] = str(self.waits.unavailable)
        elif self.role.is_master:
            info["tidemqHaSlaveAckOffset"] = str(self.server.acked)
        if self.role.is_master:
            info["tidemqHaMaxGapNotInSync"] = str(self.settings.max_gap_not_in_sync)
        client = self.client
        if client is not None:
            info["tidemqHaMasterAddress"] = client.master_address or ""
            info["tidemqHaConnected"] = str(client.connected).lower()
            info["tidemqHaReportedOffset"] = str(client.reported)
        return info
