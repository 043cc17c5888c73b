"""What the gRPC port's TLS front costs: the same gRPC sends straight to grpc
and through the front (permissive mode), in plain and over TLS, the modes
taking turns in every repetition so that a slow spell of a shared machine
hits them all.

    .venv/bin/python benchmarks/grpc_tls_bench.py [--messages N] [--concurrency C]
        [--repeat N] [--json]

Three `tidemq serve` processes run for the whole benchmark, one per way the
gRPC port is served:

- plain-native: ``--tls-mode disabled``, grpc's own plaintext port;
- tls-native: ``--grpc-tls-mode enforcing``, grpc's own TLS (C core);
- plain-front / tls-front: ``--tls-mode permissive``, the TLS front relaying
  to grpc on a Unix socket; a plain client, then a TLS client, on one port.

The client is a raw apache.rocketmq.v2 stub (grpc.aio, one channel, C calls
in flight), sending SendMessage requests of one 1 KiB message each (what the
official clients send per message) to a topic of 8 queues; a raw stub keeps
the client's own cost small, so the server's side shows. Reported per mode:
msgs/s (median over the repetitions), the CPU per message of this process
(the client) and of the server process (all its threads: grpc's, the
front's, the broker's), and each figure's ratio to plain-native (the median
of the ratios within each repetition).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2_grpc

from cpu_figures import Start
from tidemq.testing.certs import authority, issue
from tidemq.testing.client_support import create_topic, grpc_send_request
from tidemq.testing.processes import ServerProcess, serve_args

MODES = ("plain-native", "plain-front", "tls-native", "tls-front")
SERVERS = {"plain-native": "native", "tls-native": "native-tls", "plain-front": "front"}
SERVERS["tls-front"] = "front"
BODY = b"x" * 1024
QUEUES = 8
TOPIC = "GrpcTlsBench"
WARMUP = 200
TIME_LIMIT_S = 120.0
_ids = itertools.count()


def progress(text: str) -> None:
    print(f"[grpc_tls_bench] {text}", file=sys.stderr, flush=True)


class Servers:
    """The three servers, their certificate, and a channel to each mode."""

    def __init__(self, root: Path) -> None:
        ca = authority(root, "ca")
        pair = issue(root, ca, "server")
        self.ca = ca.cert.read_bytes()
        cert = ["--tls-cert", str(pair.cert), "--tls-key", str(pair.key)]
        extra = {
            "native": ["--tls-mode", "disabled"],
            "native-tls": ["--tls-mode", "permissive", *cert, "--grpc-tls-mode", "enforcing"],
            "front": ["--tls-mode", "permissive", *cert],
        }
        self.processes: dict[str, ServerProcess] = {}
        for name, args in extra.items():
            home = root / name
            home.mkdir()
            process = ServerProcess([*serve_args(home / "data"), *args], home, home / "serve.log")
            self.processes[name] = process
            process.wait_ready()
            asyncio.run(create_topic(process.namesrv, TOPIC, queues=QUEUES))

    def process(self, mode: str) -> ServerProcess:
        return self.processes[SERVERS[mode]]

    def channel(self, mode: str) -> grpc.aio.Channel:
        endpoint = self.process(mode).grpc
        if mode.startswith("tls"):
            credentials = grpc.ssl_channel_credentials(root_certificates=self.ca)
            return grpc.aio.secure_channel(endpoint, credentials)
        return grpc.aio.insecure_channel(endpoint)

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()


async def send(channel: grpc.aio.Channel, count: int, concurrency: int) -> int:
    """`count` SendMessage calls, `concurrency` at a time; how many were stored (OK)."""
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    left = count
    stored = 0
    deadline = time.monotonic() + TIME_LIMIT_S

    async def worker() -> None:
        nonlocal left, stored
        while left > 0 and time.monotonic() < deadline:
            left -= 1
            request = grpc_send_request(TOPIC, BODY, message_id=f"{next(_ids):032X}")
            response = await stub.SendMessage(request, timeout=30)
            if response.status.code == pb.Code.OK:
                stored += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return stored


async def measured(servers: Servers, mode: str, count: int, concurrency: int) -> dict[str, float]:
    pid = servers.process(mode).popen.pid
    async with servers.channel(mode) as channel:
        await send(channel, WARMUP, concurrency)  # connect, handshake, route: not timed
        start = Start.now(pid)
        done = await send(channel, count, concurrency)
        figures = start.figures(count)
    if done != count:
        raise SystemExit(f"{mode}: stored {done} of {count} within {TIME_LIMIT_S:.0f}s")
    return figures


FIGURES = ("msgs_per_s", "client_us_per_msg", "server_us_per_msg")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def summary(rows: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per mode: the median of each figure over the repetitions, and the median
    of its ratio to plain-native within each repetition (the modes of one
    repetition ran back to back, so a slow spell of the machine cancels out)."""
    table: dict[str, dict[str, float]] = {}
    base = rows["plain-native"]
    for mode in MODES:
        row: dict[str, float] = {}
        for key in FIGURES:
            row[key] = median([r[key] for r in rows[mode]])
            ratios = [r[key] / b[key] for r, b in zip(rows[mode], base, strict=True)]
            row[f"{key}_ratio"] = round(median(ratios), 2)
        table[mode] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="per mode and repetition")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="grpc-tls-bench-") as tmp:
        servers = Servers(Path(tmp))
        try:
            for rep in range(args.repeat):
                for mode in MODES:
                    row = asyncio.run(measured(servers, mode, args.messages, args.concurrency))
                    rows[mode].append(row)
                    progress(f"rep {rep + 1}/{args.repeat} {mode}: {row}")
        finally:
            servers.close()
    table = summary(rows)
    result: dict[str, Any] = {"median": table, "runs": rows, "settings": vars(args)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{'mode':13} {'msgs/s':>8} {'ratio':>6} {'client us':>9} {'ratio':>6} "
        f"{'server us':>9} {'ratio':>6}"
    )
    for mode in MODES:
        r = table[mode]
        print(
            f"{mode:13} {r['msgs_per_s']:>8,.0f} {r['msgs_per_s_ratio']:>6.2f} "
            f"{r['client_us_per_msg']:>9} {r['client_us_per_msg_ratio']:>6.2f} "
            f"{r['server_us_per_msg']:>9} {r['server_us_per_msg_ratio']:>6.2f}"
        )


if __name__ == "__main__":
    main()
