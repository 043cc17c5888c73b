"""An OpenChaos-style checker: acknowledged messages must survive a master's death.

A run starts a cluster (`tidemq cluster up`'s LocalCluster: a name server, a
master and its slave, real processes), then plays rounds. In each round
producers do sync sends to the master, every message with a key of its own,
each sent again until the broker answers SEND_OK (an error or another status
is sent again, as a user's retry would: that is where duplicates come from),
and every SEND_OK is recorded with its msgId. At a random point (a seeded
RNG) the master is SIGKILLed in the middle of the sends; the fault model
then says what survives and brings the cluster back. A consumer reads the
master of the moment all along, as a user's would (`unconsumed`: acked keys
it never received, OpenChaos's measure). At the end a reader goes through
the topic from its first offset on the surviving copy: an acknowledged key
it does not find is **lost** (it is not stored anywhere any more), a key
stored more than once a **duplicate**.

Fault models (`FaultModel`: kill the master, recover, name the copy that
counts; producers ask it where the master is, so one that moves the master
plugs in without touching the rounds):

- `kill`: the master's process dies and is started again on its own store.
  The machine lives on, so does its page cache: nothing acknowledged may be
  lost, in either role.
- `machine-loss`: the master's machine is gone with its disk; what survives
  is what the slave has. The master's store is replaced by a copy of the
  slave's (as an operator rebuilds a lost machine from its replica) and both
  start again. With SYNC_MASTER every SEND_OK is on the slave (0 lost); with
  ASYNC_MASTER what was acknowledged but not yet copied is lost: the count is
  the price of answering before the slave has the message.

- `failover`: the master's process dies; RocketMQ 5's controller (the name
  server's, `cluster up --controller`) elects the slave, producers go on
  against the new master, and the old one starts again and rejoins as a
  slave. Needs a build whose name server has `--enable-controller`.

A model is four small methods (`FaultModel`): what to kill, how the cluster
comes back, where producers send, which copy the consumer reads; the rounds
and the tally are the same for all.
"""

from __future__ import annotations

import asyncio
import functools
import random
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tidemq.cli.local_cluster import ClusterPlan, LocalCluster, NodeRecord
from tidemq.common.tasks import TaskSet
from tidemq.protocol.codes import RequestCode, ResponseCode, response_code_name
from tidemq.testing import broker_calls
from tidemq.testing.tcp_proxy import TcpProxy
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient
from tidemq.transport.errors import RemotingError

__all__ = [
    "FAULT_MODELS",
    "ChaosConfig",
    "ChaosResult",
    "Failover",
    "FaultModel",
    "KillAndRestart",
    "MachineLoss",
    "run_chaos",
]

TOPIC = "ChaosTopic"
QUEUES = 4
SEND_TIMEOUT_S = 5.0
ACKED_BEFORE_KILL = 5
"""Each round waits for this many SEND_OKs before its random kill point, so
every round kills a master that was taking writes."""
ROUND_START_DEADLINE_S = 60.0


@dataclass(frozen=True)
class ChaosConfig:
    mode: str = "kill"
    role: str = "SYNC_MASTER"
    rounds: int = 5
    seed: int = 1
    producers: int = 4
    run_s: tuple[float, float] = (0.2, 1.5)
    """How long a round's sends run past the first acknowledgements before the kill:
    drawn uniformly from this range."""
    flush: str = "async"
    ha_delay_s: float = 0.0
    """With more than 0, the slave copies through a TcpProxy that delays the HA stream this
    much each way: the distance between two machines, which loopback does not have (and
    what is on the way when a machine is lost is lost with it)."""
    body_bytes: int = 512
    """Each message: its key, a space, padding up to this size (bigger bodies, more lag)."""
    settings: dict[str, Any] = field(
        default_factory=lambda: {"slave_timeout_ms": 2000, "commitlog_file_size": 1 << 20}
    )


@dataclass
class ChaosResult:
    mode: str
    role: str
    rounds: int
    seed: int
    ha_delay_ms: float
    acked: int = 0
    """Distinct keys answered SEND_OK."""
    lost: int = 0
    """Acknowledged keys the final consumer never read."""
    duplicates: int = 0
    """Extra copies the final consumer read (a key read 3 times counts 2)."""
    stored_unacked: int = 0
    """Keys read but never acknowledged (stored, the answer lost or not SEND_OK)."""
    consumed: int = 0
    """Distinct keys the consumer received while the rounds ran (and its last reads)."""
    unconsumed: int = 0
    """Acknowledged keys that consumer never received (OpenChaos's "lost"): more than
    `lost` when a rebuilt master reused queue offsets the consumer had passed."""
    redelivered: int = 0
    """Extra copies that consumer received."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Every send's outcome: a response code name, or "error" (no answer)."""
    elapsed_s: float = 0.0
    lost_keys: list[str] = field(default_factory=list)
    """The first few lost keys, to look for in the stores."""


class FaultModel(Protocol):
    """What a fault does to the cluster, and what survives it."""

    name: str
    controller: bool
    """The cluster runs RocketMQ 5's controller (`cluster up --controller`)."""

    async def attach(self, cluster: LocalCluster) -> None:
        """The cluster is up: learn what the model needs of it."""
        ...

    def master(self, cluster: LocalCluster) -> NodeRecord:
        """The broker producers send to now."""
        ...

    async def inject(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        """The fault itself (`link`: the proxy on the HA stream, when there is one)."""
        ...

    async def recover(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        """Bring the cluster back to taking writes with a slave."""
        ...

    def survivor(self, cluster: LocalCluster) -> NodeRecord:
        """The copy the final consumer reads."""
        ...


class KillAndRestart:
    """SIGKILL the master's process, start it again on its own store."""

    name = "kill"
    controller = False

    async def attach(self, cluster: LocalCluster) -> None:
        pass

    def master(self, cluster: LocalCluster) -> NodeRecord:
        return cluster.master()

    async def inject(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        await asyncio.to_thread(cluster.kill, cluster.master().name, signal.SIGKILL)

    async def recover(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        await asyncio.to_thread(cluster.start, cluster.master().name)
        await asyncio.to_thread(cluster.wait_replicating)

    def survivor(self, cluster: LocalCluster) -> NodeRecord:
        return cluster.master()


class MachineLoss(KillAndRestart):
    """SIGKILL the master and lose its disk and its network (what the HA link still
    carried is gone with it): the master is rebuilt from the slave's copy."""

    name = "machine-loss"

    def __init__(self) -> None:
        self._link_delay_s = 0.0

    async def inject(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        if link is not None:
            self._link_delay_s = link.delay_s
            link.drop()
        await super().inject(cluster, link)

    async def recover(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        await asyncio.to_thread(self._rebuild, cluster)
        if link is not None:  # the new machine's link is as far as the old one's
            link.delay(self._link_delay_s)
        await asyncio.to_thread(cluster.start, cluster.master().name)
        await asyncio.to_thread(cluster.start, cluster.slaves()[0].name)
        await asyncio.to_thread(cluster.wait_replicating)

    @staticmethod
    def _rebuild(cluster: LocalCluster) -> None:
        master = cluster.master()
        (slave,) = cluster.slaves()
        cluster.kill(slave.name, signal.SIGTERM)  # a clean copy of the survivor
        shutil.rmtree(master.data_dir)  # the lost machine's disk
        shutil.copytree(slave.data_dir, master.data_dir)


class Failover(KillAndRestart):
    """SIGKILL the master; the controller elects its in-sync slave, producers go on
    against the new master, and the old one starts again and rejoins as a slave
    (RocketMQ 5's controller mode: the name server runs with --enable-controller)."""

    name = "failover"
    controller = True

    def __init__(self) -> None:
        self._master: NodeRecord | None = None

    async def attach(self, cluster: LocalCluster) -> None:
        self._master = await eventually(
            cluster.registered_master, "the controller electing a first master"
        )
        await eventually(
            functools.partial(_all_in_sync, cluster, self._master), "every replica in sync"
        )

    def master(self, cluster: LocalCluster) -> NodeRecord:
        assert self._master is not None, "attach first"
        return self._master

    async def inject(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        await asyncio.to_thread(cluster.kill, self.master(cluster).name, signal.SIGKILL)

    async def recover(self, cluster: LocalCluster, link: TcpProxy | None) -> None:
        old = self.master(cluster)
        self._master = await eventually(
            functools.partial(cluster.registered_master, not_at=old.address),
            f"a new master elected in place of {old.name}",
        )
        await asyncio.to_thread(cluster.start, old.name)
        await eventually(
            functools.partial(_all_in_sync, cluster, self._master),
            f"{old.name} back in the SyncStateSet of the new master {self._master.name}",
        )

    def survivor(self, cluster: LocalCluster) -> NodeRecord:
        return self.master(cluster)


async def _all_in_sync(cluster: LocalCluster, master: NodeRecord) -> bool:
    """Every replica in the master's SyncStateSet (tidemqSyncStateSet, controller mode):
    only then can the controller elect any of them when the master dies."""
    client = RemotingClient()
    try:
        runtime = await broker_calls.runtime_info(client, master.address)
    except RemotingError:
        return False
    finally:
        await client.close()
    members = [m for m in runtime.get("tidemqSyncStateSet", "").split(",") if m]
    return len(members) >= len(cluster.brokers())


FAULT_MODELS: dict[str, Callable[[], FaultModel]] = {
    KillAndRestart.name: KillAndRestart,
    MachineLoss.name: MachineLoss,
    Failover.name: Failover,
}


class _Producers:
    """Sync sends with a key each, sent again until SEND_OK; every outcome tallied."""

    def __init__(
        self, client: RemotingClient, model: FaultModel, cluster: LocalCluster, body_bytes: int
    ) -> None:
        self.client = client
        self.body_bytes = body_bytes
        self.model = model
        self.cluster = cluster
        self.acked: dict[str, str] = {}
        """key -> msgId of its SEND_OK."""
        self.statuses: Counter[str] = Counter()
        self._stopping = asyncio.Event()
        self._tasks = TaskSet("chaos-producers")

    def start(self, round_no: int, count: int) -> None:
        self._stopping.clear()
        for producer in range(count):
            self._tasks.spawn(self._produce(round_no, producer))

    async def stop(self) -> None:
        self._stopping.set()
        if not await self._tasks.wait(SEND_TIMEOUT_S * 2):
            await self._tasks.cancel_all()

    async def close(self) -> None:
        await self._tasks.cancel_all()

    async def _produce(self, round_no: int, producer: int) -> None:
        sequence = 0
        while not self._stopping.is_set():
            key = f"r{round_no:03d}-p{producer}-{sequence:06d}"
            while not self._stopping.is_set():
                if await self._send(key, sequence % QUEUES):
                    break
            sequence += 1

    async def _send(self, key: str, queue_id: int) -> bool:
        address = self.model.master(self.cluster).address
        try:
            response = await broker_calls.send(
                self.client, address, _body(key, self.body_bytes), topic=TOPIC, queue_id=queue_id,
                queues=QUEUES, timeout=SEND_TIMEOUT_S,
            )  # fmt: skip
        except RemotingError:
            self.statuses["error"] += 1
            await asyncio.sleep(0.05)  # the master is down: do not spin on refused connections
            return False
        self.statuses[_status_name(response.code)] += 1
        if response.code == ResponseCode.SUCCESS:
            self.acked[key] = response.ext_fields.get("msgId", "")
            return True
        return False


class _Consumer:
    """Pulls every queue from the master of the moment while the rounds run, from
    where it left off (a consumer group with its offsets in memory): what a user's
    consumer receives, faults and all; an offset the broker moves is followed."""

    def __init__(self, client: RemotingClient, model: FaultModel, cluster: LocalCluster) -> None:
        self.client = client
        self.model = model
        self.cluster = cluster
        self.offsets = [0] * QUEUES
        self.received: Counter[str] = Counter()
        self._stopping = asyncio.Event()
        self._tasks = TaskSet("chaos-consumer")

    def start(self) -> None:
        self._tasks.spawn(self._consume())

    async def close(self) -> None:
        await self._tasks.cancel_all()

    async def stop_and_drain(self) -> None:
        """Stop, then read on until a whole pass over the queues finds nothing new."""
        self._stopping.set()
        if not await self._tasks.wait(SEND_TIMEOUT_S * 2):
            await self._tasks.cancel_all()
        await eventually(self._at_end, "the consumer reaching the end of every queue")

    async def _at_end(self) -> bool:
        return await self._pass() == 0

    async def _consume(self) -> None:
        while not self._stopping.is_set():
            if await self._pass() == 0:
                await asyncio.sleep(0.05)  # nothing new: a consumer's pull interval

    async def _pass(self) -> int:
        """One pull of each queue; how many messages it brought (0 also when the
        master is unreachable)."""
        got = 0
        address = self.model.master(self.cluster).address
        for queue_id in range(QUEUES):
            try:
                pulled = await broker_calls.pull(
                    self.client, address, TOPIC, queue_id, self.offsets[queue_id]
                )
            except RemotingError:
                return got
            self.received.update(_key(body) for body in pulled.bodies)
            got += len(pulled.bodies)
            self.offsets[queue_id] = pulled.next_offset
        return got


async def run_chaos(
    config: ChaosConfig,
    data_dir: Path,
    progress: Callable[[str], None] = lambda _: None,
) -> ChaosResult:
    """Play `config.rounds` rounds on a fresh cluster in `data_dir`; the tally."""
    model = FAULT_MODELS[config.mode]()
    rng = random.Random(config.seed)
    if model.controller and config.ha_delay_s > 0:
        raise ValueError(f"{config.mode}: no HA delay proxy in controller mode")
    replicas = 1 if config.ha_delay_s > 0 else 2
    plan = ClusterPlan(
        brokers=1, replicas=replicas, role=config.role, flush=config.flush,
        settings=config.settings, controller=model.controller,
    )  # fmt: skip
    cluster = LocalCluster(data_dir)
    client = RemotingClient()
    proxy: TcpProxy | None = None
    producers = _Producers(client, model, cluster, config.body_bytes)
    consumer = _Consumer(client, model, cluster)
    started = time.monotonic()
    try:
        await asyncio.to_thread(cluster.up, plan)
        if config.ha_delay_s > 0:
            proxy = TcpProxy(cluster.master().ha_address)
            await proxy.start()
            proxy.delay(config.ha_delay_s)
            add = functools.partial(cluster.add_slave, plan, ha_master_address=proxy.address)
            await asyncio.to_thread(add)
        await model.attach(cluster)
        master = model.master(cluster)
        await broker_calls.create_topic(client, master.address, TOPIC, QUEUES)
        for slave in (n for n in cluster.brokers() if n is not master):  # copied every 10 s
            await eventually(
                functools.partial(_knows_topic, client, slave.address),
                f"{slave.name} copying {TOPIC} from its master",
            )
        consumer.start()
        for round_no in range(1, config.rounds + 1):
            before = len(producers.acked)
            producers.start(round_no, config.producers)
            await _first_acks(producers, before + ACKED_BEFORE_KILL)
            await asyncio.sleep(rng.uniform(*config.run_s))  # the random kill point
            await model.inject(cluster, proxy)
            await producers.stop()
            await _drop_connections(client, cluster)
            await model.recover(cluster, proxy)
            progress(
                f"round {round_no}/{config.rounds} {config.mode} {config.role}: "
                f"acked {len(producers.acked)} (+{len(producers.acked) - before}), "
                f"send errors {producers.statuses['error']}, "
                f"{time.monotonic() - started:.1f} s"
            )
        await consumer.stop_and_drain()
        read = await _read_all(client, model.survivor(cluster).address)
    finally:
        await producers.close()
        await consumer.close()
        await client.close()
        await asyncio.to_thread(cluster.down)
        if proxy is not None:
            await proxy.stop()
    return _tally(config, producers, consumer, read, time.monotonic() - started)


async def _first_acks(producers: _Producers, wanted: int) -> None:
    await eventually(
        lambda: len(producers.acked) >= wanted,
        f"{wanted} SEND_OK (so far: {dict(producers.statuses)})",
        timeout=ROUND_START_DEADLINE_S,
    )


async def _knows_topic(client: RemotingClient, address: str) -> bool:
    response = await broker_calls.call(
        client, address, RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC}
    )
    return response.code == ResponseCode.SUCCESS


async def _drop_connections(client: RemotingClient, cluster: LocalCluster) -> None:
    """Forget connections to the dead master: the next send dials it anew."""
    for node in cluster.brokers():
        connection = client.live_connection(node.address)
        if connection is not None:
            connection.abort()


async def _read_all(client: RemotingClient, address: str) -> Counter[str]:
    """Every key on the survivor, from the first offset of every queue: how often."""
    found = await broker_calls.pull_all(client, address, TOPIC, QUEUES)
    return Counter(_key(body) for bodies in found.values() for body in bodies)


def _body(key: str, size: int) -> bytes:
    head = key.encode() + b" "
    return head + b"x" * max(0, size - len(head))


def _key(body: bytes) -> str:
    return body.split(b" ", 1)[0].decode()


def _tally(
    config: ChaosConfig,
    producers: _Producers,
    consumer: _Consumer,
    read: Counter[str],
    elapsed_s: float,
) -> ChaosResult:
    lost = sorted(key for key in producers.acked if key not in read)
    received = consumer.received
    return ChaosResult(
        mode=config.mode,
        role=config.role,
        rounds=config.rounds,
        seed=config.seed,
        ha_delay_ms=config.ha_delay_s * 1000,
        acked=len(producers.acked),
        lost=len(lost),
        duplicates=sum(count - 1 for count in read.values() if count > 1),
        stored_unacked=sum(1 for key in read if key not in producers.acked),
        consumed=len(received),
        unconsumed=sum(1 for key in producers.acked if key not in received),
        redelivered=sum(count - 1 for count in received.values() if count > 1),
        statuses=dict(sorted(producers.statuses.items())),
        elapsed_s=round(elapsed_s, 1),
        lost_keys=lost[:10],
    )


def _status_name(code: int) -> str:
    """A send's answer as the producer sees it (code 0 is SEND_OK)."""
    return "SEND_OK" if code == ResponseCode.SUCCESS else response_code_name(code)
