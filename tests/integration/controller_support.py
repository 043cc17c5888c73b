"""Name servers with embedded controllers, as real processes, for the failover tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.processes import ServerProcess, free_port
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient, RemotingError


@dataclass
class ControllerNode:
    """One `tidemq namesrv --enable-controller` process (kept on the same ports across restarts)."""

    home: Path
    name: str
    port: int
    raft_port: int
    peers: list[str]
    scan_ms: int = 300
    extra_args: list[str] = field(default_factory=list)
    """More `tidemq namesrv` options (TLS, for one)."""
    process: ServerProcess | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.home / f"{self.name}.json"
        config.write_text(json.dumps({"scan_not_active_broker_ms": self.scan_ms}))
        log = self.home / f"{self.name}-{len(self.logs)}.log"
        self.logs.append(log)
        args = [
            "-v",
            "namesrv",
            "--port",
            str(self.port),
            "--config",
            str(config),
            "--enable-controller",
            "--controller-port",
            str(self.raft_port),
            "--controller-peers",
            ";".join(self.peers),
            "--controller-dir",
            str(self.home / f"{self.name}-raft"),
            *self.extra_args,
        ]
        self.process = ServerProcess(args, self.home, log)
        self.process.wait_ready()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.logs if p.exists())


def controller_nodes(
    home: Path, count: int, scan_ms: int = 300, extra_args: list[str] | None = None
) -> list[ControllerNode]:
    raft_ports = [free_port() for _ in range(count)]
    peers = [f"127.0.0.1:{p}" for p in raft_ports]
    return [
        ControllerNode(
            home, f"namesrv{i}", free_port(), raft_ports[i], peers, scan_ms, list(extra_args or [])
        )
        for i in range(count)
    ]


async def controller_call(
    client: RemotingClient,
    nodes: list[ControllerNode],
    code: int,
    fields: dict[str, str],
    body: bytes = b"",
) -> RemotingCommand:
    """Send to each live controller in turn until one is the leader (as a broker does)."""
    last: RemotingCommand | None = None
    for node in nodes:
        if node.process is None:
            continue
        try:
            response = await client.invoke(
                node.address, RemotingCommand.request(code, fields, body), 5.0
            )
        except RemotingError:
            continue
        if response.code != ResponseCode.CONTROLLER_NOT_LEADER:
            return response
        last = response
    assert last is not None, "no controller answered"
    return last


async def heartbeat(
    client: RemotingClient, nodes: list[ControllerNode], broker_id: int, timeout_ms: int = 1500
) -> None:
    for node in nodes:
        if node.process is None:
            continue
        fields = {
            "clusterName": "C",
            "brokerName": "broker-a",
            "brokerAddr": f"127.0.0.1:{10000 + broker_id}",
            "brokerId": str(broker_id),
            "heartbeatTimeoutMills": str(timeout_ms),
            "epoch": "0",
            "maxOffset": "0",
        }
        request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields)
        response = await client.invoke(node.address, request, 5.0)
        assert response.code == ResponseCode.SUCCESS, response.remark


async def controller_leader(client: RemotingClient, nodes: list[ControllerNode]) -> ControllerNode:
    """The controller that is the Raft leader (CONTROLLER_GET_METADATA_INFO says isLeader)."""

    async def find() -> ControllerNode | None:
        for node in nodes:
            if node.process is None:
                continue
            request = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
            response = await client.invoke(node.address, request, 5.0)
            if response.ext_fields.get("isLeader") == "true":
                return node
        return None

    return await eventually(find, "a controller leader")
