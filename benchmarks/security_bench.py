"""What access control and TLS cost: the same client work against one
`tidemq serve` per mode (plain, ACL, TLS, ACL and TLS), the modes taking
turns in every repetition so that a slow spell of a shared machine hits
them all.

    .venv/bin/python benchmarks/security_bench.py [--messages N] [--repeat N] [--json]

Phases, each with our blocking client and 1 KiB bodies on a topic of 8 queues:
- produce-batch: `Producer.send_batch` of 64 messages a request;
- send: `Producer.send`, one message a request (the caller-thread path);
- consume: `LitePullConsumer.poll` of what produce-batch wrote.

ACL: `--acl` with a plain_acl.yml whose application account has PUB|SUB on
the topic and SUB on the group, not admin (so every request is signed,
verified and checked against the account's permissions). TLS: `--tls-mode
enforcing` with a certificate from a CA made for the run (`tidemq.testing.certs`,
openssl), the client trusting that CA. Reported per mode and phase: msgs/s
(median over the repetitions) and the CPU per message of the client process
(all its threads) and of the server, which stay comparable when other work
shares the cores; and each mode's ratio to plain.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpu_figures import Start, median_run
from tidemq import (
    AdminClient,
    ConsumeFromWhere,
    Credentials,
    LitePullConsumer,
    Producer,
    TlsConfig,
    make_message,
)
from tidemq.testing.certs import authority, issue
from tidemq.testing.processes import ServerProcess, serve_args

MODES = ("plain", "acl", "tls", "acl+tls")
PHASES = ("produce-batch", "send", "consume")
BODY = b"x" * 1024
BATCH = 64
QUEUES = 8
ADMIN = Credentials("benchAdmin01", "benchAdminSecret01")
APP = Credentials("benchApp0001", "benchAppSecret0001")
TIME_LIMIT_S = 120.0


def progress(text: str) -> None:
    print(f"[security_bench] {text}", file=sys.stderr, flush=True)


def policy(topic_prefix: str) -> str:
    return f"""\
accounts:
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
  - accessKey: {APP.access_key}
    secretKey: {APP.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{", ".join(f"{topic_prefix}{i}=PUB|SUB" for i in range(64))}]
    groupPerms: [{", ".join(f"{topic_prefix}G{i}=SUB" for i in range(64))}]
"""


class Setup:
    """The files every mode's server and client need: certificates and the policy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        ca = authority(root, "ca")
        server = issue(root, ca, "server")
        self.tls_args = [
            "--tls-mode", "enforcing",
            "--tls-cert", str(server.cert),
            "--tls-key", str(server.key),
            "--tls-ca", str(ca.cert),
        ]  # fmt: skip
        self.client_tls = TlsConfig(ca=str(ca.cert))
        self.acl = root / "plain_acl.yml"
        self.acl.write_text(policy("SecBench"))

    def server_args(self, mode: str, data_dir: Path) -> list[str]:
        args = serve_args(data_dir)
        if "acl" in mode:
            args += ["--acl", str(self.acl)]
        if "tls" in mode:
            args += self.tls_args
        return args

    def client(self, mode: str, credentials: Credentials = APP) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if "acl" in mode:
            options["credentials"] = credentials
        if "tls" in mode:
            options["tls"] = self.client_tls
        return options


def measured(server_pid: int, count: int, work: Callable[[], int]) -> dict[str, float]:
    """Run `work` (it returns how many messages it handled) and time it."""
    start = Start.now(server_pid)
    done = work()
    figures = start.figures(count)
    if done != count:
        raise SystemExit(f"handled {done} of {count} messages within {TIME_LIMIT_S:.0f}s")
    return figures


def produce_batch(producer: Producer, topic: str, count: int) -> int:
    done, deadline = 0, time.monotonic() + TIME_LIMIT_S
    while done < count and time.monotonic() < deadline:
        n = min(BATCH, count - done)
        producer.send_batch([make_message(topic, BODY) for _ in range(n)])
        done += n
    return done


def send(producer: Producer, topic: str, count: int) -> int:
    done, deadline = 0, time.monotonic() + TIME_LIMIT_S
    while done < count and time.monotonic() < deadline:
        producer.send(make_message(topic, BODY))
        done += 1
    return done


def consume(namesrv: str, topic: str, group: str, count: int, options: dict[str, Any]) -> int:
    consumer = LitePullConsumer(
        group,
        namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **options,
    )
    consumer.subscribe(topic)
    got, deadline = 0, time.monotonic() + TIME_LIMIT_S
    with consumer:
        while got < count and time.monotonic() < deadline:
            got += len(consumer.poll(1.0))
    return got


async def create_topic(namesrv: str, topic: str, options: dict[str, Any]) -> None:
    async with AdminClient(namesrv, **options) as admin:
        await admin.create_topic(topic, queues=QUEUES)


def run_phases(
    pid: int,
    namesrv: str,
    producer_group: str,
    topic: str,
    group: str,
    count: int,
    singles: int,
    options: dict[str, Any],
) -> dict[str, Any]:
    """The PHASES against the server `pid`: produce-batch of `count`, `singles`
    sends, then consume all of it; each phase's figures by its name."""
    row: dict[str, Any] = {}
    with Producer(producer_group, namesrv, **options) as producer:
        producer.send(make_message(topic, BODY))  # the route, outside the timing
        row["produce-batch"] = measured(pid, count, lambda: produce_batch(producer, topic, count))
        row["send"] = measured(pid, singles, lambda: send(producer, topic, singles))
    total = count + singles + 1
    row["consume"] = measured(pid, total, lambda: consume(namesrv, topic, group, total, options))
    return row


def run_mode(setup: Setup, mode: str, rep: int, count: int, singles: int) -> dict[str, Any]:
    data = setup.root / f"{mode.replace('+', '-')}-{rep}"
    data.mkdir()
    process = ServerProcess(setup.server_args(mode, data / "data"), data, data / "serve.log")
    try:
        process.wait_ready()
        namesrv, pid = process.namesrv, process.popen.pid
        topic, group = f"SecBench{rep}", f"SecBenchG{rep}"
        asyncio.run(create_topic(namesrv, topic, setup.client(mode, ADMIN)))
        options = setup.client(mode)
        return run_phases(pid, namesrv, "SecBenchP", topic, group, count, singles, options)
    finally:
        process.kill()


def summary(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per mode and phase: the median run (by msgs/s) and its ratio to plain."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        table[mode] = {}
        for phase in PHASES:
            table[mode][phase] = median_run(r[phase] for r in rows[mode])
    for mode in MODES:
        for phase in PHASES:
            plain = table["plain"][phase]["msgs_per_s"]
            table[mode][phase]["vs_plain"] = round(table[mode][phase]["msgs_per_s"] / plain, 2)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="per produce-batch phase")
    parser.add_argument("--singles", type=int, default=10_000, help="per send phase")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        setup = Setup(Path(tmp))
        for rep in range(args.repeat):
            for mode in MODES:
                rows[mode].append(run_mode(setup, mode, rep, args.messages, args.singles))
                progress(f"rep {rep + 1}/{args.repeat} {mode}: {rows[mode][-1]}")
    table = summary(rows)
    if args.json:
        print(json.dumps({"median": table, "runs": rows}, indent=2))
        return
    print(
        f"{'mode':8} {'phase':14} {'msgs/s':>9} {'vs plain':>8} {'client us':>9} {'server us':>9}"
    )
    for mode in MODES:
        for phase in PHASES:
            r = table[mode][phase]
            print(
                f"{mode:8} {phase:14} {r['msgs_per_s']:>9,} {r['vs_plain']:>8.2f} "
                f"{r['client_us_per_msg']:>9} {r['server_us_per_msg']:>9}"
            )


if __name__ == "__main__":
    main()
