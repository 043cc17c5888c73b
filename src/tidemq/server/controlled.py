"""One replica of a controller-mode broker set: it runs in the role the controller gives it.

RocketMQ 5's ReplicasManager (apache/rocketmq, broker/.../controller/
ReplicasManager) registers the broker with the controller, beats to it
(brokerHeartbeatInterval), asks to be elected when its broker set has no
master (brokerElect), and switches role when the controller says so
(changeToMaster / changeToSlave). tidemq does the same around a `Broker`:

* **Role.** The controller's master runs as a master (registered with the
  name servers as broker id 0, so clients send to it); every other replica
  runs as a slave of it, under its own replica id. A role change stops the
  broker and starts it again in the new role on the same ports and store
  (a second or so; clients reconnect), which keeps every role's rules in
  one place (`Broker`).
* **Epochs.** A new master appends its master epoch and its commitlog end
  to the epoch file before it takes a write (`store_opened`). A slave,
  before each connection to its master, asks for the master's epoch entries
  (GET_BROKER_EPOCH_CACHE), cuts its commitlog back to the last point both
  share (`ha.epochs.consistent_point`), says what it dropped, and takes the
  master's entries (`prepare_copy`): an old master back from the dead drops
  the writes no in-sync replica had (none of them was acknowledged).
* **Fencing.** A master that hears of another master, or is told it is
  fenced when it alters its SyncStateSet, refuses writes at once
  (`FileMessageStore.fence`), then restarts as a slave.
* **SyncStateSet.** A master waits for every member (`ha.sync_state`) and
  asks the controller, every `sync_state_set_check_interval_ms`, to drop a
  member that fell behind or to add a slave that caught up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging

from tidemq.broker.config import BrokerConfig
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.tasks import TaskSet
from tidemq.controller.client import ControllerClient, MasterInfo, NoController
from tidemq.ha.config import BrokerRole
from tidemq.ha.epochs import EPOCH_FILE, EpochEntry, EpochFile, consistent_point, epoch_at
from tidemq.ha.slave import ReplicationStopped
from tidemq.ha.sync_state import next_sync_state_set
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.server.broker import Broker
from tidemq.store.file_store import FileMessageStore
from tidemq.store.replica import ReplicaTruncation
from tidemq.transport import RemotingClient, RemotingError

__all__ = ["ControlledBroker"]

log = logging.getLogger("tidemq.controller")

RESTART_GRACE_S = 0.5
"""How long a broker changing role lets its requests in flight finish."""
RESTART_RETRY_S = 1.0
"""After a failed start in a new role, the next attempt."""

_FENCED = (
    ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
    ResponseCode.CONTROLLER_INVALID_MASTER,
)


class ControlledBroker:
    """`await start()`, `broker` (the running one), `await stop()`."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        if not config.enable_controller_mode:
            raise ValueError("a ControlledBroker needs enable_controller_mode")
        self.config = config
        self.clock = clock
        self.replica_id = config.broker_id
        self.address = f"{config.advertised_host}:{config.listen_port}"
        self.ha_port = config.ha_port(config.listen_port)
        self.ha_address = config.ha_advertised_address or f"{config.advertised_host}:{self.ha_port}"
        config.store_dir.mkdir(parents=True, exist_ok=True)
        self.epochs = EpochFile(config.store_dir / EPOCH_FILE)
        sign = config.inner_credentials.sign if config.inner_credentials is not None else None
        self._client = RemotingClient(
            name=f"broker-{config.broker_name}-controller",
            sign=sign,
            tls=config.namesrv_client_tls,
        )
        self.controller = ControllerClient(config.controller_addresses, self._client)
        self._master_client = RemotingClient(
            name=f"broker-{config.broker_name}-master-epochs",
            sign=sign,
            tls=config.master_client_tls,
        )
        self.broker: Broker | None = None
        self.master: MasterInfo | None = None
        """What the controller said last."""
        self.role: BrokerRole | None = None
        self.truncations: list[ReplicaTruncation] = []
        self.role_changes = 0
        self._registered = False
        self._new_epoch: int | None = None
        self._caught_up_end = 0
        self._last_check = 0.0
        self._expanding = False
        self._role_changed = asyncio.Event()
        self._tasks = TaskSet(f"replica-{config.broker_name}-{self.replica_id}")

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Register, learn (or become) the master, start in that role."""
        delay = 0.2
        while self.master is None or self.master.master_id is None:
            try:
                await self._beat()
                await self._round()
            except NoController as exc:
                log.warning("waiting for a controller leader: %s", exc)
            if self.master is None or self.master.master_id is None:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        await self._start_broker()
        self._tasks.spawn(self._beat_loop())
        self._tasks.spawn(self._supervise())

    async def stop(self, grace: float = 5.0) -> None:
        await self._tasks.cancel_all()
        if self.broker is not None:
            await self.broker.stop(grace)
        await self._client.close()
        await self._master_client.close()

    @property
    def is_master(self) -> bool:
        return self.master is not None and self.master.master_id == self.replica_id

    # -- the broker's hooks (server.broker.ControllerHooks) -------------------------------

    def store_opened(self, store: FileMessageStore) -> None:
        if self._new_epoch is None:
            return
        end = store.commitlog.max_offset
        # a slave promoted behind its old master holds epochs it has no byte of
        self.epochs.truncate_from(end + 1)
        if not self.epochs.append(self._new_epoch, end):
            log.error(
                "epoch %d at %d not appended: the epoch file ends with %s",
                self._new_epoch,
                end,
                self.epochs.entries[-1:],
            )
        log.warning(
            "replica %d is the master of %s from commitlog offset %d (master epoch %d)",
            self.replica_id,
            self.config.broker_name,
            end,
            self._new_epoch,
        )

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self.epochs.entries)

    async def prepare_copy(self) -> None:
        """Before a slave connects: cut back to what it shares with the master."""
        broker, master = self.broker, self.master
        if broker is None or broker.store is None or master is None or master.address is None:
            raise ReplicationStopped("the master is not known yet")
        store = broker.store
        request = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE)
        try:
            response = await self._master_client.invoke(master.address, request, 3.0)
        except RemotingError as exc:
            raise ReplicationStopped(f"the master's epochs: {exc}") from None
        if response.code != ResponseCode.SUCCESS:
            raise ReplicationStopped(f"the master's epochs: {response.remark}")
        try:
            document = json.loads(response.body)
            theirs = [
                EpochEntry(int(e["epoch"]), int(e["startOffset"])) for e in document["epochList"]
            ]
            their_end = int(document["maxOffset"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ReplicationStopped(f"unreadable epochs from the master: {exc}") from None
        end = store.commitlog.max_offset
        mine = self.epochs.entries
        if not mine:
            point: int | None = min(end, their_end)
        else:
            point = consistent_point(mine, end, theirs, their_end)
        if point is None:
            raise ReplicationStopped(
                f"this replica shares no master epoch with its master (ours {mine}, "
                f"theirs {theirs}): move its store aside to copy the master's afresh"
            )
        if point < end:
            truncation = store.truncate_replica(point)
            self.truncations.append(truncation)
            log.warning(
                "replica %d rejoins %s as a slave: it dropped what no in-sync replica had, %s",
                self.replica_id,
                self.config.broker_name,
                truncation.describe(),
            )
        self.epochs.replace(theirs)

    # -- the controller -------------------------------------------------------------------

    async def _beat(self) -> None:
        store = self.broker.store if self.broker is not None else None
        end = store.commitlog.max_offset if store is not None else 0
        config = self.config
        await self.controller.heartbeat(
            {
                "clusterName": config.cluster_name,
                "brokerName": config.broker_name,
                "brokerAddr": self.address,
                "brokerId": str(self.replica_id),
                "epoch": str(epoch_at(self.epochs.entries, end)),
                "maxOffset": str(end),
                "confirmOffset": str(end),
                "heartbeatTimeoutMills": str(config.controller_heartbeat_timeout_ms),
                "electionPriority": str(config.broker_election_priority),
            }
        )

    def _identity(self) -> dict[str, str]:
        return {
            "clusterName": self.config.cluster_name,
            "brokerName": self.config.broker_name,
            "brokerId": str(self.replica_id),
        }

    async def _round(self) -> None:
        """Register once; learn the master; with none, ask to be it."""
        if not self._registered:
            response = await self.controller.call_leader(
                RequestCode.CONTROLLER_REGISTER_BROKER,
                {**self._identity(), "brokerAddress": self.address, "haAddress": self.ha_address},
            )
            if response.code != ResponseCode.SUCCESS:
                log.warning("the controller refused the registration: %s", response.remark)
                return
            self._registered = True
            log.info("registered with the controller as replica %d", self.replica_id)
        info = await self.controller.replica_info(self.config.broker_name)
        if info is None or info.master_id is None:
            response = await self.controller.call_leader(
                RequestCode.CONTROLLER_ELECT_MASTER, self._identity()
            )
            if response.code == ResponseCode.SUCCESS:
                info = await self.controller.replica_info(self.config.broker_name)
            elif response.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                log.info("no master for %s yet: %s", self.config.broker_name, response.remark)
        if info is not None and info.master_id is not None:
            self._learn(info)

    def _learn(self, info: MasterInfo) -> None:
        previous = self.master
        self.master = info
        if self.broker is None:
            return
        same_master = previous is not None and (previous.master_id, previous.master_epoch) == (
            info.master_id,
            info.master_epoch,
        )
        if same_master:
            return
        if self.role is not None and self.role.is_master and info.master_id != self.replica_id:
            self._fence(
                f"{self.config.broker_name} replica {self.replica_id} is no longer the master: "
                f"the controller elected replica {info.master_id} at {info.address} "
                f"(master epoch {info.master_epoch})"
            )
        self._role_changed.set()

    def _fence(self, reason: str) -> None:
        store = self.broker.store if self.broker is not None else None
        if store is not None and store.fenced is None:
            store.fence(reason)
            log.error("fenced: %s", reason)

    async def _beat_loop(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._beat()
                await self._round()
                if self.role is not None and self.role.is_master and self.is_master:
                    await self._check_sync_state_set()
            except NoController as exc:
                log.warning("no controller leader reachable: %s", exc)
            except Exception:
                log.exception("controller round failed")

    def _caught_up(self, replica_id: int) -> None:
        """A slave outside the SyncStateSet caught up: ask to add it now."""
        if self._expanding:
            return
        self._expanding = True
        log.info("replica %d caught up: asking to add it to the SyncStateSet", replica_id)

        async def expand() -> None:
            try:
                await self._check_sync_state_set(caught_up=replica_id)
            except NoController as exc:
                log.warning("no controller leader reachable: %s", exc)
            finally:
                self._expanding = False

        self._tasks.spawn(expand())

    async def _check_sync_state_set(self, *, caught_up: int | None = None) -> None:
        """Every `sync_state_set_check_interval_ms` (or at once when replica
        `caught_up` reached the master's end): ask the controller for the
        SyncStateSet `next_sync_state_set` proposes."""
        broker, master = self.broker, self.master
        if broker is None or broker.replication is None or master is None:
            return
        waits = broker.replication.sync_state
        store = broker.store
        if waits is None or store is None:
            return
        now = self.clock.monotonic()
        periodic = caught_up is None
        if periodic:
            if now - self._last_check < self.config.sync_state_set_check_interval_ms / 1000:
                return
            self._last_check = now
            caught_up_end = self._caught_up_end
        else:
            progress = waits.slaves.get(caught_up) if caught_up is not None else None
            if progress is None:
                return
            caught_up_end = progress.acked  # it was the master's end when reported
        proposal = next_sync_state_set(
            waits.members,
            self.replica_id,
            waits.slaves,
            caught_up_end,
            asyncio.get_running_loop().time(),
            self.config.ha_max_time_slave_not_catchup_ms / 1000,
        )
        if periodic:
            self._caught_up_end = store.commitlog.max_offset
        if proposal is None:
            return
        response = await self.controller.call_leader(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {
                "brokerName": self.config.broker_name,
                "masterBrokerId": str(self.replica_id),
                "masterEpoch": str(master.master_epoch),
            },
            json.dumps(
                {"syncStateSet": sorted(proposal), "syncStateSetEpoch": waits.members_epoch}
            ).encode(),
        )
        if response.code == ResponseCode.SUCCESS:
            epoch = int(response.ext_fields.get("newSyncStateSetEpoch", waits.members_epoch + 1))
            log.warning(
                "%s: SyncStateSet %s -> %s (epoch %d)",
                self.config.broker_name,
                sorted(waits.members),
                sorted(proposal),
                epoch,
            )
            waits.use_members(proposal, epoch)
        elif response.code in _FENCED:
            self._fence(f"the controller fenced this master: {response.remark}")
            self._role_changed.set()
        elif response.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH:
            waits.use_members(waits.members, waits.members_epoch)  # resynced at the next round
            info = await self.controller.replica_info(self.config.broker_name)
            if info is not None and info.master_id == self.replica_id:
                waits.use_members(info.sync_state_set, info.sync_state_set_epoch)
        else:
            log.info("SyncStateSet change %s refused: %s", sorted(proposal), response.remark)

    # -- roles ----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            await self._role_changed.wait()
            self._role_changed.clear()
            master = self.master
            if master is None or self.broker is None:
                continue
            wanted = (
                BrokerRole.SYNC_MASTER if master.master_id == self.replica_id else BrokerRole.SLAVE
            )
            current_master_ha = self.broker.config.ha_master_address
            if wanted is self.role and (
                self.epochs.last_epoch == master.master_epoch
                if wanted.is_master
                else current_master_ha == master.ha_address
            ):
                continue
            log.warning(
                "replica %d of %s: %s -> %s (master %s, epoch %d)",
                self.replica_id,
                self.config.broker_name,
                self.role.value if self.role is not None else "none",
                wanted.value,
                master.master_id,
                master.master_epoch,
            )
            old, self.broker = self.broker, None
            with contextlib.suppress(Exception):
                await old.stop(RESTART_GRACE_S)
            self.role_changes += 1
            try:
                await self._start_broker()
            except Exception:
                # (a port still held, a store that would not open): try again shortly
                log.exception("replica %d could not start as %s", self.replica_id, wanted.value)
                self.broker = old
                self.role = None
                await asyncio.sleep(RESTART_RETRY_S)
                self._role_changed.set()

    async def _start_broker(self) -> None:
        master = self.master
        assert master is not None and master.master_id is not None
        config = self.config
        if master.master_id == self.replica_id:
            self._new_epoch = master.master_epoch
            inner = dataclasses.replace(
                config,
                enable_controller_mode=False,  # the inner broker: a plain master or slave
                broker_role=BrokerRole.SYNC_MASTER,
                broker_id=0,
                ha_listen_port=self.ha_port,
                ha_master_address=None,
            )
        else:
            self._new_epoch = None
            inner = dataclasses.replace(
                config,
                enable_controller_mode=False,
                broker_role=BrokerRole.SLAVE,
                broker_id=self.replica_id,
                ha_listen_port=self.ha_port,
                ha_master_address=master.ha_address,
            )
        broker = Broker(inner, self.clock, replica=self)
        self.broker = broker
        await broker.start()
        self.role = inner.broker_role
        waits = broker.replication.sync_state if broker.replication is not None else None
        if waits is not None:
            waits.use_members(
                master.sync_state_set | {self.replica_id}, master.sync_state_set_epoch
            )
            waits.on_caught_up = self._caught_up
        log.info(
            "replica %d of %s started as %s", self.replica_id, config.broker_name, self.role.value
        )
