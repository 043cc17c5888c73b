"""A name server and master/slave broker processes on loopback, for the replication tests.

Each broker is a real `tidemq -v broker --config FILE` process on fixed free
ports (a restart keeps its addresses, as a restarted machine would), with
small commitlog files so a few hundred messages cross file boundaries. The
test talks to each broker directly over remoting (send to the master, pull
from the slave) through one RemotingClient.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing import broker_calls
from tidemq.testing.processes import ServerProcess, free_port, started
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient, TlsConfig

FILE_SIZE = 256 * 1024
TOPIC = "Orders"
QUEUES = 4


class Addressed(Protocol):
    """A broker the test talks to: a Node here, or a LocalCluster's NodeRecord."""

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...


@dataclass
class Node:
    """One broker process of a master/slave pair."""

    name: str
    home: Path
    settings: dict[str, Any]
    process: ServerProcess | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.settings['listen_port']}"

    @property
    def data_dir(self) -> Path:
        return Path(self.settings["data_dir"])

    @property
    def commitlog_dir(self) -> Path:
        return self.data_dir / "store" / "commitlog"

    def start(self) -> dict[str, str]:
        config = self.home / f"{self.name}.json"
        config.write_text(json.dumps(self.settings))
        log = self.home / f"{self.name}-{len(self.logs)}.log"
        self.logs.append(log)
        self.process = ServerProcess(["-v", "broker", "--config", str(config)], self.home, log)
        return self.process.wait_ready()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: a clean stop; SIGKILL: the process dies where it is."""
        process = self.process
        if process is None:
            return
        process.popen.send_signal(sig)
        process.popen.wait(timeout=60)
        process.kill()  # releases the pipes
        self.process = None

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.popen.send_signal(sig)

    def log_text(self) -> str:
        if self.process is not None:
            self.process.stderr()  # flushes
        return "".join(path.read_text(errors="replace") for path in self.logs if path.exists())


def commitlog_bytes(node: Node) -> dict[str, bytes]:
    """Every commitlog file of a node, by name."""
    return {path.name: path.read_bytes() for path in sorted(node.commitlog_dir.iterdir())}


class Brokers:
    """A name server process, the broker nodes of one broker name, and a client."""

    def __init__(self, home: Path, namesrv: str, client: RemotingClient) -> None:
        self.home = home
        self.namesrv = namesrv
        self.client = client
        self.nodes: list[Node] = []

    def node(self, name: str, role: str, broker_id: int, **settings: Any) -> Node:
        node = Node(
            name,
            self.home,
            {
                "broker_name": "broker-a",
                "broker_id": broker_id,
                "broker_role": role,
                "listen_port": free_port(),
                "ha_listen_port": free_port(),
                "namesrv_addrs": [self.namesrv],
                "data_dir": str(self.home / name),
                "commitlog_file_size": FILE_SIZE,
                "slave_sync_interval_s": 0.5,
                **settings,
            },
        )
        self.nodes.append(node)
        return node

    async def stop(self, node: Node, sig: int = signal.SIGTERM) -> None:
        """Stop a node and drop the client's connection to it (the next call
        dials the node anew, as a client does once it sees the connection gone)."""
        node.stop(sig)
        connection = self.client.live_connection(node.address)
        if connection is not None:
            connection.abort()

    async def call(
        self, node: Addressed, code: int, ext: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return await broker_calls.call(self.client, node.address, code, ext, body)

    async def create_topic(
        self, master: Addressed, topic: str = TOPIC, queues: int = QUEUES
    ) -> None:
        await broker_calls.create_topic(self.client, master.address, topic, queues)

    async def send(
        self, node: Addressed, body: bytes, *, queue_id: int, topic: str = TOPIC
    ) -> RemotingCommand:
        return await broker_calls.send(
            self.client, node.address, body, topic=topic, queue_id=queue_id, queues=QUEUES
        )

    async def pull_all(
        self, node: Addressed, topic: str = TOPIC, queues: int = QUEUES
    ) -> dict[int, list[bytes]]:
        """Every body of every queue, read from `node` by PULL_MESSAGE."""
        return await broker_calls.pull_all(self.client, node.address, topic, queues)

    async def runtime_info(self, node: Addressed) -> dict[str, str]:
        return await broker_calls.runtime_info(self.client, node.address)

    async def caught_up(self, master: Addressed, slave: Addressed) -> int:
        """Wait until the slave's commitlog ends where the master's does; that offset."""

        async def same() -> int | None:
            ends = [
                int((await self.runtime_info(node))["commitLogMaxOffset"])
                for node in (master, slave)
            ]
            return ends[0] if ends[0] == ends[1] and ends[0] > 0 else None

        return await eventually(same, f"{slave.name} catching up with {master.name}")

    async def topic_on(self, node: Addressed, topic: str = TOPIC) -> None:
        """Wait until `node` knows `topic` (a slave copies it from its master)."""

        async def known() -> bool:
            response = await self.call(node, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            return response.code == ResponseCode.SUCCESS

        await eventually(known, f"{node.name} knowing {topic}")

    def stop_all(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                node.process.kill()
                node.process = None


@asynccontextmanager
async def running_brokers(
    home: Path, namesrv_args: Sequence[str] = (), tls: TlsConfig | None = None
) -> AsyncIterator[Brokers]:
    """A name server process and an empty Brokers of it; every node killed at the end.

    `namesrv_args`: more options of the name server; `tls`: how the test's client dials."""
    client = RemotingClient(tls=tls)
    with namesrv(home, namesrv_args) as address:
        env = Brokers(home, address, client)
        try:
            yield env
        finally:
            await client.close()
            env.stop_all()


@contextmanager
def namesrv(home: Path, extra_args: Sequence[str] = ()) -> Iterator[str]:
    with started(["namesrv", "--port", "0", *extra_args], home, "namesrv") as (_, ready):
        yield ready["namesrv"]


def swap_store(node: Node, snapshot: Path) -> None:
    """Put an older copy of a node's store in place (the node is stopped)."""
    store = node.data_dir / "store"
    shutil.rmtree(store)
    shutil.copytree(snapshot, store)
