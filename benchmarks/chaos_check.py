"""Kill masters at random and count what acknowledged messages did not survive
(tidemq.testing.chaos: OpenChaos's question, on tidemq's master/slave pairs).

    .venv/bin/python benchmarks/chaos_check.py [--rounds N]
        [--mode kill|machine-loss|failover|all]
        [--role SYNC_MASTER|ASYNC_MASTER|both] [--ha-delay-ms MS] [--seed N] [--json]

Every (mode, role) pair runs on a fresh cluster (a name server, a master and
its slave, processes on loopback) for `--rounds` rounds: producers doing sync
sends, a consumer reading all along, the master SIGKILLed at a random point
of each round. Reported per pair: messages acknowledged (SEND_OK), lost
(acknowledged, not on the surviving copy), duplicates (stored twice),
stored-but-unacknowledged, unconsumed (acknowledged, never received by the
consumer), redelivered (received twice), and every send's outcome.
`--ha-delay-ms` puts a delaying proxy on the HA link (the distance between
two machines; not with failover); a lost machine loses
what is on the way. `failover` needs the controller (namesrv
--enable-controller); `all` leaves it out where the build has none.

A pair whose role promises no loss (kill: both roles; machine-loss:
SYNC_MASTER) and lost any message makes the exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

from tidemq.testing.chaos import FAULT_MODELS, ChaosConfig, ChaosResult, run_chaos

ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


def progress(text: str) -> None:
    print(f"[chaos_check] {text}", file=sys.stderr, flush=True)


def must_lose_nothing(result: ChaosResult) -> bool:
    """kill: the machine and its page cache live on, so nothing may be lost in
    either role; machine-loss and failover: a SYNC_MASTER answered SEND_OK only
    once the slave had the message."""
    return result.mode == "kill" or result.role == "SYNC_MASTER"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mode", choices=[*FAULT_MODELS, "all"], default="all")
    parser.add_argument("--role", choices=[*ROLES, "both"], default="both")
    parser.add_argument("--ha-delay-ms", type=float, default=10.0)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1 or args.producers < 1 or args.ha_delay_ms < 0:
        parser.error("--rounds and --producers must be 1 or more, --ha-delay-ms 0 or more")
    modes = list(FAULT_MODELS) if args.mode == "all" else [args.mode]
    roles = list(ROLES) if args.role == "both" else [args.role]

    results: list[ChaosResult] = []
    root = Path(tempfile.mkdtemp(prefix="tidemq-chaos-"))
    for mode in modes:
        for role in roles:
            config = ChaosConfig(
                mode=mode,
                role=role,
                rounds=args.rounds,
                seed=args.seed,
                producers=args.producers,
                ha_delay_s=0.0 if mode == "failover" else args.ha_delay_ms / 1000,
            )
            progress(f"{mode} {role}: {args.rounds} rounds, seed {args.seed}")
            result = asyncio.run(run_chaos(config, root / f"{mode}-{role}", progress))
            results.append(result)
            progress(
                f"{mode} {role}: acked {result.acked}, lost {result.lost}, "
                f"duplicates {result.duplicates} ({result.elapsed_s} s)"
            )

    failed = [r for r in results if r.lost and must_lose_nothing(r)]
    if failed:
        progress(f"stores kept for a look in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    else:
        print(f"{'mode':<13} {'role':<13} {'rounds':>6} {'acked':>8} {'lost':>6} "
              f"{'dups':>5} {'unacked':>8} {'unconsumed':>10} {'redelivered':>11}"
              "  statuses")  # fmt: skip
        for r in results:
            print(f"{r.mode:<13} {r.role:<13} {r.rounds:>6} {r.acked:>8} {r.lost:>6} "
                  f"{r.duplicates:>5} {r.stored_unacked:>8} {r.unconsumed:>10} "
                  f"{r.redelivered:>11}  {r.statuses}")  # fmt: skip
        for r in failed:
            print(f"LOST with {r.mode} {r.role}: {r.lost} acknowledged messages, "
                  f"e.g. {r.lost_keys}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
