"""Failover time: a controller-mode master killed -> the first successful send to the new master.

    .venv/bin/python benchmarks/failover_bench.py [--rounds N] [--timing fast|rocketmq] [--json]

One name server with its embedded controller and two replicas of one broker
name, all processes on loopback. A producer (our AsyncProducer, default
settings) sends one message after another; each round waits until both
replicas are in the master's SyncStateSet, SIGKILLs the master, and times
until the producer's first SEND_OK (only the new master can answer one).
The killed replica is then started again (it rejoins as a slave) before
the next round, which kills the other one: the roles alternate.

Timings (`--timing`):
- fast: controller_heartbeat_timeout_ms 1500, broker_heartbeat_interval_ms 300,
  controller scan every 300 ms (what the failover tests use);
- rocketmq: RocketMQ's defaults, controllerHeartBeatTimeoutMills 10 s,
  brokerHeartbeatInterval 1 s, scanNotActiveBrokerInterval 5 s.

Reported: every round's seconds, their p50 and max.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidemq.client.errors import ClientError
from tidemq.client.model import SendStatus
from tidemq.client.producer import AsyncProducer
from tidemq.common.message import Message
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing import broker_calls
from tidemq.testing.processes import ServerProcess, free_port
from tidemq.transport import RemotingClient

TOPIC = "FailoverBench"
TIMINGS: dict[str, dict[str, Any]] = {
    "fast": {
        "broker": {
            "controller_heartbeat_timeout_ms": 1500,
            "broker_heartbeat_interval_ms": 300,
            "sync_state_set_check_interval_ms": 300,
        },
        "scan_ms": 300,
    },
    "rocketmq": {
        "broker": {
            "controller_heartbeat_timeout_ms": 10_000,
            "broker_heartbeat_interval_ms": 1000,
            "sync_state_set_check_interval_ms": 5000,
        },
        "scan_ms": 5000,
    },
}
ROUND_LIMIT_S = 120.0


def progress(text: str) -> None:
    print(f"[failover_bench] {text}", file=sys.stderr, flush=True)


class Cluster:
    def __init__(self, home: Path, timing: str) -> None:
        self.home = home
        self.timing = TIMINGS[timing]
        self.namesrv_port = free_port()
        self.namesrv = f"127.0.0.1:{self.namesrv_port}"
        self.processes: dict[str, ServerProcess] = {}
        self.ports = {i: (free_port(), free_port()) for i in (1, 2)}
        self.client = RemotingClient(name="failover-bench")

    def address(self, replica: int) -> str:
        return f"127.0.0.1:{self.ports[replica][0]}"

    def start_namesrv(self) -> None:
        config = self.home / "namesrv.json"
        config.write_text(json.dumps({"scan_not_active_broker_ms": self.timing["scan_ms"]}))
        args = ["namesrv", "--port", str(self.namesrv_port), "--config", str(config)]
        args += ["--enable-controller", "--controller-port", str(free_port())]
        args += ["--controller-dir", str(self.home / "controller")]
        self._start("namesrv", args)

    def start_replica(self, replica: int) -> str:
        listen, ha = self.ports[replica]
        settings = {
            "broker_name": "broker-a",
            "broker_id": replica,
            "listen_port": listen,
            "ha_listen_port": ha,
            "namesrv_addrs": [self.namesrv],
            "data_dir": str(self.home / f"replica{replica}"),
            "enable_controller_mode": True,
            "controller_addr": self.namesrv,
            **self.timing["broker"],
        }
        config = self.home / f"replica{replica}.json"
        config.write_text(json.dumps(settings))
        ready = self._start(f"replica{replica}", ["broker", "--config", str(config)])
        return ready["role"]

    def _start(self, name: str, args: list[str]) -> dict[str, str]:
        log = self.home / f"{name}-{time.monotonic_ns()}.log"
        process = ServerProcess(args, self.home, log)
        self.processes[name] = process
        return process.wait_ready(60)

    def kill(self, replica: int) -> None:
        process = self.processes.pop(f"replica{replica}")
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait(30)
        process.kill()
        connection = self.client.live_connection(self.address(replica))
        if connection is not None:
            connection.abort()

    async def call(
        self, replica: int, code: int, ext: dict[str, str] | None = None
    ) -> RemotingCommand:
        return await self.client.invoke(
            self.address(replica), RemotingCommand.request(code, ext or {}), 10.0
        )

    async def create_topic(self, master: int) -> None:
        await broker_calls.create_topic(self.client, self.address(master), TOPIC, 4)

    async def in_sync(self, master: int) -> bool:
        """Both replicas in the master's SyncStateSet, and the slave has the
        topic (it copies topics every slave_sync_interval_s): it can take over."""
        slave = 2 if master == 1 else 1
        try:
            response = await self.call(master, RequestCode.GET_BROKER_RUNTIME_INFO)
            topic = await self.call(slave, RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC})
        except Exception:
            return False
        table = json.loads(response.body)["table"] if response.code == ResponseCode.SUCCESS else {}
        return table.get("tidemqSyncStateSet") == "1,2" and topic.code == ResponseCode.SUCCESS

    async def close(self) -> None:
        await self.client.close()
        for process in self.processes.values():
            process.kill()


async def wait_for(check: Any, what: str, limit_s: float = ROUND_LIMIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {limit_s:.0f} s")
        await asyncio.sleep(0.1)


async def first_send_ok(producer: AsyncProducer, limit_s: float) -> float:
    """Seconds until a send is answered SEND_OK, sending one after the other."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            result = await producer.send(Message(TOPIC, b"x" * 1024))
        except ClientError:
            continue
        if result.status is SendStatus.SEND_OK:
            return time.monotonic() - started
    raise TimeoutError(f"no SEND_OK within {limit_s:.0f} s of the kill")


async def run(rounds: int, timing: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        cluster = Cluster(Path(tmp), timing)
        producer: AsyncProducer | None = None
        try:
            cluster.start_namesrv()
            assert cluster.start_replica(1) == "SYNC_MASTER"
            assert cluster.start_replica(2) == "SLAVE"
            await cluster.create_topic(1)
            producer = AsyncProducer("failover-bench", cluster.namesrv, send_timeout_s=3)
            await producer.start()
            master, seconds = 1, []
            for number in range(1, rounds + 1):
                await wait_for(
                    lambda m=master: cluster.in_sync(m),
                    "SyncStateSet {1, 2} and the topic on the slave",
                )
                result = await producer.send(Message(TOPIC, b"before"))
                assert result.status is SendStatus.SEND_OK, result.status
                cluster.kill(master)
                took = await first_send_ok(producer, ROUND_LIMIT_S)
                seconds.append(took)
                progress(f"round {number}: replica {master} killed, SEND_OK after {took:.2f} s")
                assert cluster.start_replica(master) == "SLAVE"
                master = 2 if master == 1 else 1
        finally:
            if producer is not None:
                await producer.shutdown()
            await cluster.close()
    ordered = sorted(seconds)
    return {
        "timing": timing,
        "rounds": rounds,
        "seconds": [round(s, 3) for s in seconds],
        "p50_s": round(statistics.median(ordered), 3),
        "max_s": round(ordered[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--timing", choices=sorted(TIMINGS), default="fast")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    report = asyncio.run(run(args.rounds, args.timing))
    if args.json:
        print(json.dumps(report))
        return
    print(f"failover ({report['timing']} timing), {report['rounds']} rounds:")
    print("  round seconds: " + " ".join(f"{s:.2f}" for s in report["seconds"]))
    print(f"  p50 {report['p50_s']:.2f} s, max {report['max_s']:.2f} s")


if __name__ == "__main__":
    main()
