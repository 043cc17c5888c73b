"""What /metrics costs the broker: the same client work against one `tidemq serve
--http-port 0` per mode, the modes taking turns in every repetition so that a
slow spell of a shared machine hits them all.

    .venv/bin/python benchmarks/metrics_bench.py [--messages N] [--singles N] [--repeat N] [--json]

Modes:
- off: `--set metrics_enable=false`: nothing counted for /metrics (the put and
  get rates of `cluster list` only, as before metrics existed);
- on: metrics on (the default): RPC latency per request, message types and
  sizes, pull offsets, ... counted with plain integer adds;
- on+scrape: metrics on and /metrics scraped every `--scrape-interval` s
  (1 s, fifteen times Prometheus' default rate) while the work runs, so the
  collectors' cost shows too.

Before the servers run, the counting itself is timed in this process
(`hot_path`): what a put, a pull and a request add with metrics on and off,
in ns per call, the smallest of interleaved repetitions (the floor a busy
machine lets through).

The work and the figures are security_bench.py's (our blocking client, 1 KiB
bodies, a topic of 8 queues): `send_batch` of 64, single `send`s, and
`LitePullConsumer.poll` of all of it; msgs/s (median over the repetitions),
CPU per message of the client and of the server process, each mode's ratio
to off, and the server's CPU per message over the client's (the client's
work is the same in every mode: on a shared machine this ratio shows what
the server does more, where the others move with the neighbours' load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import timeit
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cpu_figures import median_run, server_cpu_s
from security_bench import PHASES, create_topic, run_phases
from tidemq.broker.stats import BrokerStats
from tidemq.common.clock import SYSTEM_CLOCK
from tidemq.common.rpc_stats import RpcStats
from tidemq.testing.processes import ServerProcess, serve_args

MODES = ("off", "on", "on+scrape")


def progress(text: str) -> None:
    print(f"[metrics_bench] {text}", file=sys.stderr, flush=True)


@contextmanager
def scraping(address: str | None, interval_s: float) -> Iterator[list[int]]:
    """Scrape http://`address`/metrics every `interval_s` until the block ends
    (nothing when `address` is None); yields the list of page sizes read."""
    pages: list[int] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
                pages.append(len(response.read()))

    thread = threading.Thread(target=loop, daemon=True) if address else None
    if thread is not None:
        thread.start()
    try:
        yield pages
    finally:
        stop.set()
        if thread is not None:
            thread.join()


def hot_path(repeat: int, calls: int = 100_000) -> dict[str, dict[str, float]]:
    """ns per call of the counting a put, a pull and a request do, on and off."""
    loop = asyncio.new_event_loop()
    stats = {mode: BrokerStats(SYSTEM_CLOCK, detailed=mode == "on") for mode in ("on", "off")}
    rpc = RpcStats("remoting", str, str)

    def request_on() -> None:  # what Connection adds: stamp, elapsed, record
        started = loop.time()
        rpc.record(310, 0, (loop.time() - started) * 1000.0)

    work: dict[str, dict[str, Callable[[], object]]] = {
        "put": {
            mode: (lambda s=s: s.record_put("BenchTopic", 1, 1024, "normal"))
            for mode, s in stats.items()
        },
        "pull": {
            mode: (lambda s=s: s.record_get("BenchTopic", "BenchGroup", 32, 32_768, 3, 640))
            for mode, s in stats.items()
        },
        "request": {"on": request_on, "off": lambda: None},
    }
    best: dict[str, dict[str, float]] = {name: {} for name in work}
    for _ in range(repeat):
        for name, modes in work.items():
            for mode, call in modes.items():
                ns = 1e9 * timeit.timeit(call, number=calls) / calls
                best[name][mode] = min(best[name].get(mode, ns), ns)
    loop.close()
    return {
        name: {
            **{m: round(v) for m, v in modes.items()},
            "added": round(modes["on"] - modes["off"]),
        }
        for name, modes in best.items()
    }


def scrape_cost_ms(address: str, pid: int, scrapes: int = 20) -> float:
    """The server's CPU per scrape of /metrics, scraped back to back once the work is done."""
    before = server_cpu_s(pid)
    for _ in range(scrapes):
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
            response.read()
    return round(1000 * (server_cpu_s(pid) - before) / scrapes, 1)


def run_mode(
    root: Path, mode: str, rep: int, count: int, singles: int, interval_s: float
) -> dict[str, Any]:
    data = root / f"{mode.replace('+', '-')}-{rep}"
    data.mkdir()
    settings = {"metrics_enable": "false"} if mode == "off" else {}
    args = serve_args(data / "data", settings=settings, http=True)
    process = ServerProcess(args, data, data / "serve.log")
    try:
        process.wait_ready()
        namesrv, pid = process.namesrv, process.popen.pid
        topic, group = f"MetricsBench{rep}", f"MetricsBenchG{rep}"
        asyncio.run(create_topic(namesrv, topic, {}))
        address = process.http if mode == "on+scrape" else None
        with scraping(address, interval_s) as pages:
            row = run_phases(pid, namesrv, "MetricsBenchP", topic, group, count, singles, {})
        if pages:
            row["scrapes"] = {"count": len(pages), "bytes": max(pages)}
            row["scrape_server_ms"] = scrape_cost_ms(process.http, pid)
        return row
    finally:
        process.kill()


def summary(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per mode and phase: the median run (by msgs/s), its ratio to off, and the
    median of the server's CPU per message over the client's (`server_per_client`):
    the client does the same work in every mode, so this ratio moves with what
    the server does, not with how busy the machine is."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        table[mode] = {}
        for phase in PHASES:
            runs = [r[phase] for r in rows[mode]]
            table[mode][phase] = median_run(runs)
            ratios = sorted(r["server_us_per_msg"] / r["client_us_per_msg"] for r in runs)
            table[mode][phase]["server_per_client"] = round(ratios[len(ratios) // 2], 2)
    for mode in MODES:
        for phase in PHASES:
            off = table["off"][phase]["msgs_per_s"]
            table[mode][phase]["vs_off"] = round(table[mode][phase]["msgs_per_s"] / off, 2)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="per produce-batch phase")
    parser.add_argument("--singles", type=int, default=10_000, help="per send phase")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counting = hot_path(max(5, args.repeat))
    progress(f"hot path, ns per call: {counting}")
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as tmp:
        for rep in range(args.repeat):
            for mode in MODES:
                row = run_mode(
                    Path(tmp), mode, rep, args.messages, args.singles, args.scrape_interval
                )
                rows[mode].append(row)
                progress(f"rep {rep + 1}/{args.repeat} {mode}: {row}")
    table = summary(rows)
    if args.json:
        print(json.dumps({"hot_path_ns": counting, "median": table, "runs": rows}, indent=2))
        return
    costs = sorted(r["scrape_server_ms"] for r in rows["on+scrape"] if "scrape_server_ms" in r)
    if costs:
        print(f"one scrape: {costs[len(costs) // 2]} ms of server CPU (median)")
    print(f"{'hot path':10} {'on ns':>7} {'off ns':>7} {'added':>7}")
    for name, ns in counting.items():
        print(f"{name:10} {ns['on']:>7} {ns['off']:>7} {ns['added']:>7}")
    print(
        f"{'mode':10} {'phase':14} {'msgs/s':>9} {'vs off':>7} {'client us':>9} "
        f"{'server us':>9} {'server/client':>13}"
    )
    for mode in MODES:
        for phase in PHASES:
            r = table[mode][phase]
            print(
                f"{mode:10} {phase:14} {r['msgs_per_s']:>9,} {r['vs_off']:>7.2f} "
                f"{r['client_us_per_msg']:>9} {r['server_us_per_msg']:>9} "
                f"{r['server_per_client']:>13.2f}"
            )


if __name__ == "__main__":
    main()
