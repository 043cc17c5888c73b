"""What a slave costs the producer: the same sends to a master alone, to an
ASYNC_MASTER with a slave and to a SYNC_MASTER with a slave, each a name
server and broker processes on loopback, the modes taking turns in every
repetition so that a slow spell of a shared machine hits them all.

    .venv/bin/python benchmarks/replication_bench.py [--messages N] [--repeat N] [--json]

Phases, with our blocking client, 1 KiB bodies and a topic of 8 queues:
- produce-batch: `Producer.send_batch` of 64 messages a request;
- send: `Producer.send`, one message a request, one after the other (on a
  SYNC_MASTER each waits for the slave's report);
- send-16: 16 threads doing `send` at once (their sends share a group commit
  and one slave report).

Reported per mode and phase: msgs/s (median over the repetitions), the CPU
per message of the master and of the slave, and each mode's ratio to the
master alone; and for the modes with a slave, how long after the last
produce-batch answer the slave's commitlog reached the master's end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from security_bench import produce_batch, send
from tidemq import AdminClient, Producer, make_message
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.processes import ServerProcess, free_port
from tidemq.transport import RemotingClient

MODES = ("alone", "async+slave", "sync+slave")
PHASES = ("produce-batch", "send", "send-16")
BODY = b"x" * 1024
QUEUES = 8
THREADS = 16
TIME_LIMIT_S = 120.0


def progress(text: str) -> None:
    print(f"[replication_bench] {text}", file=sys.stderr, flush=True)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Deployment:
    """A name server, a master and (unless alone) its slave, as processes."""

    def __init__(self, root: Path, mode: str) -> None:
        self.root = root
        self.processes: list[ServerProcess] = []
        self.namesrv = self._start(["namesrv", "--port", "0"], "namesrv")["namesrv"]
        role = "SYNC_MASTER" if mode == "sync+slave" else "ASYNC_MASTER"
        self.master = self._broker("master", role, 0)
        self.slave = self._broker("slave", "SLAVE", 1) if mode != "alone" else None

    def _start(self, args: list[str], name: str) -> dict[str, str]:
        process = ServerProcess(args, self.root, self.root / f"{name}.log")
        self.processes.append(process)
        return process.wait_ready()

    def _broker(self, name: str, role: str, broker_id: int) -> ServerProcess:
        config = self.root / f"{name}.json"
        config.write_text(
            json.dumps(
                {
                    "broker_name": "broker-bench",
                    "broker_id": broker_id,
                    "broker_role": role,
                    "listen_port": free_port(),
                    "ha_listen_port": 0,
                    "namesrv_addrs": [self.namesrv],
                    "data_dir": str(self.root / name),
                    "auto_create_topic": True,
                }
            )
        )
        self._start(["broker", "--config", str(config)], name)
        return self.processes[-1]

    def pids(self) -> list[int]:
        brokers = [self.master] + ([self.slave] if self.slave is not None else [])
        return [process.popen.pid for process in brokers]

    def close(self) -> None:
        for process in reversed(self.processes):
            process.kill()


async def commitlog_end(client: RemotingClient, address: str) -> int:
    response = await client.invoke(
        address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5.0
    )
    return int(json.loads(response.body)["table"]["commitLogMaxOffset"])


def catch_up_s(deployment: Deployment) -> float | None:
    """Seconds until the slave's commitlog ends where the master's does."""
    slave = deployment.slave
    if slave is None:
        return None

    async def wait() -> float:
        started = time.perf_counter()
        async with RemotingClient() as client:
            target = await commitlog_end(client, deployment.master.broker)
            deadline = started + TIME_LIMIT_S
            while await commitlog_end(client, slave.broker) < target:
                if time.perf_counter() > deadline:
                    raise SystemExit("the slave did not catch up")
                await asyncio.sleep(0.01)
        return time.perf_counter() - started

    return round(asyncio.run(wait()), 3)


def measured(pids: list[int], count: int, work: Callable[[], int]) -> dict[str, float]:
    before, wall = [cpu_s(pid) for pid in pids], time.perf_counter()
    done = work()
    seconds = time.perf_counter() - wall
    if done != count:
        raise SystemExit(f"handled {done} of {count} messages within {TIME_LIMIT_S:.0f}s")
    cpu = [cpu_s(pid) - start for pid, start in zip(pids, before, strict=True)]
    row = {
        "msgs_per_s": round(count / seconds),
        "master_us_per_msg": round(1e6 * cpu[0] / count, 1),
    }
    if len(cpu) > 1:
        row["slave_us_per_msg"] = round(1e6 * cpu[1] / count, 1)
    return row


def send_concurrently(producer: Producer, topic: str, count: int) -> int:
    each = count // THREADS  # count is a multiple of THREADS
    done = [0] * THREADS

    def worker(index: int) -> None:
        done[index] = send(producer, topic, each)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


def run_mode(root: Path, mode: str, rep: int, count: int, singles: int) -> dict[str, Any]:
    data = root / f"{mode.replace('+', '-')}-{rep}"
    data.mkdir()
    deployment = Deployment(data, mode)
    try:
        topic = f"RepBench{rep}"

        async def create() -> None:
            async with AdminClient(deployment.namesrv) as admin:
                await admin.create_topic(topic, queues=QUEUES)

        asyncio.run(create())
        pids = deployment.pids()
        row: dict[str, Any] = {}
        with Producer("RepBenchP", deployment.namesrv) as producer:
            producer.send(make_message(topic, BODY))  # the route, outside the timing
            row["produce-batch"] = measured(
                pids, count, lambda: produce_batch(producer, topic, count)
            )
            row["catch_up_s"] = catch_up_s(deployment)
            row["send"] = measured(pids, singles, lambda: send(producer, topic, singles))
            many = singles - singles % THREADS
            row["send-16"] = measured(pids, many, lambda: send_concurrently(producer, topic, many))
        return row
    finally:
        deployment.close()


def summary(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        table[mode] = {}
        for phase in PHASES:
            runs = sorted((r[phase] for r in rows[mode]), key=lambda r: r["msgs_per_s"])
            table[mode][phase] = dict(runs[len(runs) // 2])
        catch = sorted(r["catch_up_s"] for r in rows[mode] if r["catch_up_s"] is not None)
        table[mode]["catch_up_s"] = catch[len(catch) // 2] if catch else None
    for mode in MODES:
        for phase in PHASES:
            alone = table["alone"][phase]["msgs_per_s"]
            table[mode][phase]["vs_alone"] = round(table[mode][phase]["msgs_per_s"] / alone, 2)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000, help="per produce-batch phase")
    parser.add_argument("--singles", type=int, default=3_200, help="per send phase")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as tmp:
        for rep in range(args.repeat):
            for mode in MODES:
                rows[mode].append(run_mode(Path(tmp), mode, rep, args.messages, args.singles))
                progress(f"rep {rep + 1}/{args.repeat} {mode}: {rows[mode][-1]}")
    table = summary(rows)
    if args.json:
        print(json.dumps({"median": table, "runs": rows}, indent=2))
        return
    print(
        f"{'mode':12} {'phase':14} {'msgs/s':>9} {'vs alone':>8} {'master us':>9} {'slave us':>8}"
    )
    for mode in MODES:
        for phase in PHASES:
            r = table[mode][phase]
            print(
                f"{mode:12} {phase:14} {r['msgs_per_s']:>9,} {r['vs_alone']:>8.2f} "
                f"{r['master_us_per_msg']:>9} {r.get('slave_us_per_msg', '-'):>8}"
            )
        if table[mode]["catch_up_s"] is not None:
            print(f"{mode:12} slave caught up {table[mode]['catch_up_s']} s after produce-batch")


if __name__ == "__main__":
    main()
