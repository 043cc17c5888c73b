"""A whole cluster on loopback, each server its own detached process: `tidemq cluster up`.

`up` starts one name server and, per broker name, a master (broker id 0) and
its slaves (ids 1 and up), each a `tidemq -v namesrv|broker` process in its
own session (so it outlives the command that started it), writing its ready
line to `NAME.out` and its log to `NAME.log` in the data directory. What was
started goes to `cluster.json` there: `status` reads it, `down` stops exactly
those processes (a process is known by its pid *and* its start time, so a pid
reused by another program is never signalled).

The same code runs the clusters of the replication tests and the chaos
checker (tidemq.testing.chaos): they start a node again (`restart`) or kill
it (`kill`) by name, with the addresses it had.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import string
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tidemq.client.admin import AdminClient, AdminError
from tidemq.transport.ports import free_port

__all__ = [
    "STATE_FILE",
    "ClusterError",
    "ClusterPlan",
    "LocalCluster",
    "NodeRecord",
]

STATE_FILE = "cluster.json"
READY_DEADLINE_S = 60.0
STOP_DEADLINE_S = 30.0
ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


class ClusterError(Exception):
    """Something a person can act on: no cluster here, one already running, a node that
    did not start (with the end of its log)."""


@dataclass
class NodeRecord:
    """One server process of the cluster, as `cluster.json` keeps it."""

    name: str
    kind: str
    """"namesrv" or "broker"."""
    address: str
    args: list[str]
    """The `tidemq` arguments that start it (again)."""
    pid: int = 0
    started_at: float = 0.0
    """The process's creation time: with the pid, what identifies it."""
    role: str = ""
    broker_name: str = ""
    broker_id: int = -1
    ha_address: str = ""
    config: str = ""
    data_dir: str = ""


@dataclass(frozen=True)
class ClusterPlan:
    """What `up` starts."""

    brokers: int = 1
    replicas: int = 2
    """Copies of each broker's messages: 1 master and replicas - 1 slaves."""
    role: str = "SYNC_MASTER"
    flush: str = "async"
    base_port: int | None = None
    """None: free ports; else the name server on it and broker i's copy j on
    base_port + 100 * (i + 1) + 10 * j (its HA port one above)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """More broker settings, the same for every broker."""
    controller: bool = False
    """The name server embeds the controller (`--enable-controller`), the brokers
    run in controller mode (`enable_controller_mode`, `controller_addr`)."""
    grpc: bool = False
    """Each broker serves RocketMQ 5 clients too (`grpc_port`: free, or two above
    its remoting port with `base_port`)."""

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 26:
            raise ClusterError(f"--brokers {self.brokers}: 1 to 26")
        if not 1 <= self.replicas <= 9:
            raise ClusterError(f"--replicas {self.replicas}: 1 to 9")
        if self.role not in ROLES:
            raise ClusterError(f"--role {self.role}: one of {', '.join(ROLES)}")


def broker_names(count: int) -> list[str]:
    """broker-a, broker-b, ...: RocketMQ's own naming in its sample configs."""
    return [f"broker-{letter}" for letter in string.ascii_lowercase[:count]]


def broker_settings(
    plan: ClusterPlan,
    data_dir: Path,
    namesrv: str,
    index: int,
    copy: int,
) -> dict[str, Any]:
    """The config file of broker `index`'s copy `copy` (0 the master)."""
    if plan.base_port is None:
        port, ha_port = free_port(), free_port()
    else:
        port = plan.base_port + 100 * (index + 1) + 10 * copy
        ha_port = port + 1
    name = broker_names(plan.brokers)[index]
    role = plan.role if copy == 0 else "SLAVE"
    # In controller mode broker_id is the replica's id, from 1 (RocketMQ 5's
    # controller numbers replicas from 1 and registers the one it elects as 0).
    broker_id = copy + 1 if plan.controller else copy
    settings: dict[str, Any] = {
        "broker_name": name,
        "broker_id": broker_id,
        "broker_role": role,
        "listen_port": port,
        "ha_listen_port": ha_port,
        "namesrv_addrs": [namesrv],
        "data_dir": str(data_dir / f"{name}-{broker_id}"),
        "flush_mode": plan.flush,
        "auto_create_topic": True,
    }
    if plan.controller:
        settings["enable_controller_mode"] = True
        settings["controller_addr"] = namesrv
    if plan.grpc:
        settings["grpc_port"] = free_port() if plan.base_port is None else port + 2
    settings.update(plan.settings)
    return settings


def _master_replicating(runtime: Mapping[str, str], slaves: int) -> bool:
    """A master (its runtime figures) has its `slaves` connected and a report covering
    its whole commitlog: a SYNC_MASTER waits only for a slave that has reported, and
    one that is behind its end is not the copy it claims to be yet."""
    if int(runtime.get("tidemqHaSlaves", "0")) < slaves:
        return False
    if slaves == 0:
        return True
    acked = int(runtime.get("tidemqHaSlaveAckOffset", "0"))
    return acked >= int(runtime.get("commitLogMaxOffset", "0"))


def _identity(pid: int) -> float | None:
    """The creation time of a live process `pid`; None when there is none (or a zombie)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except psutil.Error:
        return None


class LocalCluster:
    """The processes of one data directory's cluster."""

    def __init__(self, data_dir: Path, nodes: list[NodeRecord] | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.nodes: dict[str, NodeRecord] = {node.name: node for node in nodes or []}
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    # -- the state file ---------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    @classmethod
    def load(cls, data_dir: Path) -> LocalCluster:
        path = data_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {data_dir} (no {STATE_FILE}): start one with "
                f"`tidemq cluster up --data-dir {data_dir}`"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from None
        return cls(data_dir, [NodeRecord(**node) for node in raw["nodes"]])

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = {"namesrv": self.namesrv, "nodes": [asdict(n) for n in self.nodes.values()]}
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=2) + "\n")
        temporary.replace(self.state_path)

    # -- views ------------------------------------------------------------------------

    @property
    def namesrv(self) -> str:
        return next((n.address for n in self.nodes.values() if n.kind == "namesrv"), "")

    def brokers(self) -> list[NodeRecord]:
        return [node for node in self.nodes.values() if node.kind == "broker"]

    def master(self, broker_name: str = "broker-a") -> NodeRecord:
        return next(n for n in self.brokers() if n.broker_name == broker_name and n.broker_id == 0)

    async def registered_master(
        self, broker_name: str = "broker-a", *, not_at: str = ""
    ) -> NodeRecord | None:
        """The node the name server lists as `broker_name`'s master (broker id 0), if it
        is not at `not_at`: in controller mode the controller decides which it is."""
        async with AdminClient([self.namesrv]) as admin:
            try:
                info = await admin.cluster_info()
            except AdminError:
                return None
        broker = info.brokers.get(broker_name)
        address = broker.master if broker is not None else None
        if address is None or address == not_at:
            return None
        return next((n for n in self.brokers() if n.address == address), None)

    def slaves(self, broker_name: str = "broker-a") -> list[NodeRecord]:
        return [n for n in self.brokers() if n.broker_name == broker_name and n.broker_id > 0]

    def alive(self, name: str) -> bool:
        node = self.nodes[name]
        return node.pid > 0 and _identity(node.pid) == node.started_at

    def status(self) -> list[dict[str, Any]]:
        """Each process: name, kind, role, address, HA address, pid, running or not."""
        return [
            {
                "name": node.name,
                "kind": node.kind,
                "role": node.role or "-",
                "address": node.address,
                "ha": node.ha_address or "-",
                "pid": node.pid,
                "running": self.alive(node.name),
                "log": str(self.data_dir / f"{node.name}.log"),
            }
            for node in self.nodes.values()
        ]

    # -- starting ---------------------------------------------------------------------

    def up(self, plan: ClusterPlan) -> None:
        """Start the name server, then every broker (masters first); on any failure
        stop what was started and raise ClusterError."""
        if self.state_path.exists():
            running = LocalCluster.load(self.data_dir)
            if any(running.alive(name) for name in running.nodes):
                raise ClusterError(
                    f"a cluster is already running from {self.data_dir}: "
                    f"`tidemq cluster down --data-dir {self.data_dir}` first"
                )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            namesrv_port = 0 if plan.base_port is None else plan.base_port
            args = ["namesrv", "--port", str(namesrv_port)]
            if plan.controller:  # its Raft port and journal: fixed, and in the data dir
                raft_port = free_port() if plan.base_port is None else plan.base_port + 1
                args += [
                    "--enable-controller",
                    "--controller-port",
                    str(raft_port),
                    "--controller-dir",
                    str(self.data_dir / "controller"),
                ]
            namesrv = self._add(NodeRecord("namesrv", "namesrv", "", args))
            for copy in range(plan.replicas):
                for index in range(plan.brokers):
                    settings = broker_settings(plan, self.data_dir, namesrv.address, index, copy)
                    self.add_broker(settings)
            self.wait_replicating()
        except BaseException:
            self.down()
            raise
        self.save()

    def wait_replicating(self, deadline_s: float = READY_DEADLINE_S) -> None:
        """Wait until every running slave is connected to its master's HA port and every
        running master counts its running slaves, one of which has reported the master's
        whole commitlog (a SYNC_MASTER answers SEND_OK from then). Call it with no writes
        going on."""
        asyncio.run(self._wait_replicating(deadline_s))

    async def _wait_replicating(self, deadline_s: float) -> None:
        wanted = {
            node.name: node for node in self.brokers() if node.address and self.alive(node.name)
        }
        expected = {
            name: sum(1 for s in self.slaves(node.broker_name) if s.name in wanted)
            for name, node in wanted.items()
            if node.broker_id == 0
        }

        async def lagging(admin: AdminClient) -> list[str]:
            behind = []
            for name, node in wanted.items():
                try:
                    runtime = await admin.broker_runtime_stats(node.address)
                except AdminError:
                    behind.append(name)
                    continue
                if node.broker_id == 0:
                    if not _master_replicating(runtime, expected[name]):
                        behind.append(name)
                elif runtime.get("tidemqHaConnected") != "true" and any(
                    m.name in wanted
                    for m in self.brokers()
                    if m.broker_name == node.broker_name and m.broker_id == 0
                ):
                    behind.append(name)
            return behind

        async with AdminClient([self.namesrv]) as admin:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + deadline_s
            while behind := await lagging(admin):
                if loop.time() > deadline:
                    raise ClusterError(
                        f"no replication after {deadline_s:g} s: {', '.join(behind)} "
                        f"not connected (see their logs in {self.data_dir})"
                    )
                await asyncio.sleep(0.1)  # polling other processes: no event to wait on

    def add_slave(
        self, plan: ClusterPlan, *, index: int = 0, copy: int = 1, ha_master_address: str
    ) -> NodeRecord:
        """Start slave `copy` of broker `index` copying from `ha_master_address` (a proxy in
        front of its master's HA port, say) instead of the address the name server gives."""
        settings = broker_settings(plan, self.data_dir, self.namesrv, index, copy)
        settings["ha_master_address"] = ha_master_address
        node = self.add_broker(settings)
        self.wait_replicating()
        return node

    def add_broker(self, settings: Mapping[str, Any]) -> NodeRecord:
        """Write a broker's config file next to the others and start it."""
        name = f"{settings['broker_name']}-{settings['broker_id']}"
        config = self.data_dir / f"{name}.json"
        config.write_text(json.dumps(dict(settings), indent=2) + "\n")
        record = NodeRecord(
            name,
            "broker",
            "",
            ["broker", "--config", str(config)],
            role=str(settings["broker_role"]),
            broker_name=str(settings["broker_name"]),
            broker_id=int(settings["broker_id"]),
            config=str(config),
            data_dir=str(settings["data_dir"]),
        )
        return self._add(record)

    def _add(self, record: NodeRecord) -> NodeRecord:
        self.nodes[record.name] = record
        self.start(record.name)
        return record

    def start(self, name: str) -> NodeRecord:
        """Start (or start again) node `name`, detached, and wait for its ready line."""
        node = self.nodes[name]
        out = self.data_dir / f"{name}.out"
        log = self.data_dir / f"{name}.log"
        with out.open("wb") as stdout, log.open("ab") as stderr:
            child = subprocess.Popen(
                [sys.executable, "-m", "tidemq.cli.main", "-v", *node.args],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self._children[name] = child
        node.pid = child.pid
        node.started_at = _identity(child.pid) or 0.0
        ready = self._wait_ready(node, child, out, log)
        node.address = ready.get("namesrv" if node.kind == "namesrv" else "broker", "")
        node.ha_address = ready.get("ha", "")
        if node.kind == "broker":
            node.role = ready.get("role", node.role)
        self.save()
        return node

    def _wait_ready(
        self, node: NodeRecord, child: subprocess.Popen[bytes], out: Path, log: Path
    ) -> dict[str, str]:
        deadline = time.monotonic() + READY_DEADLINE_S
        while True:
            for line in out.read_text(errors="replace").splitlines():
                if line.startswith("tidemq ready "):
                    return dict(item.split("=", 1) for item in line.split()[2:])
            code = child.poll()
            if code is not None or time.monotonic() > deadline:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                what = f"exited with {code}" if code is not None else "was not ready in time"
                raise ClusterError(f"{node.name} {what}; the end of {log}:\n{tail}")
            time.sleep(0.05)  # polling a file another process writes: no event to wait on

    # -- stopping ---------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal node `name` and wait until it is gone (SIGKILL: it dies where it is)."""
        node = self.nodes[name]
        if self.alive(name):
            os.kill(node.pid, sig)
        self._wait_gone(node, STOP_DEADLINE_S)

    def _wait_gone(self, node: NodeRecord, deadline_s: float) -> bool:
        """Wait for the process to end (reaping it when it is our child); False on timeout."""
        child = self._children.pop(node.name, None)
        if child is not None:
            try:
                child.wait(timeout=deadline_s)
                return True
            except subprocess.TimeoutExpired:
                self._children[node.name] = child
                return False
        deadline = time.monotonic() + deadline_s
        while _identity(node.pid) == node.started_at:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)  # another process's exit: no event to wait on
        return True

    def down(self) -> list[dict[str, str]]:
        """Stop every node (brokers, slaves first, then the name server) with SIGTERM,
        SIGKILL after STOP_DEADLINE_S; remove the state file. What became of each."""
        order = sorted(
            self.nodes.values(),
            key=lambda n: (n.kind == "namesrv", -n.broker_id, n.name),
        )
        results = []
        for node in order:
            if not self.alive(node.name):
                self._wait_gone(node, 0)
                outcome = "not running"
            else:
                os.kill(node.pid, signal.SIGTERM)
                if self._wait_gone(node, STOP_DEADLINE_S):
                    outcome = "stopped"
                else:
                    os.kill(node.pid, signal.SIGKILL)
                    self._wait_gone(node, STOP_DEADLINE_S)
                    outcome = "killed (did not stop in time)"
            results.append({"name": node.name, "pid": str(node.pid), "outcome": outcome})
        self.state_path.unlink(missing_ok=True)
        return results
