"""The garbage collector's settings for a server process.

CPython's cyclic collector runs a generation-0 pass every 700 new container
objects, and every pass walks the objects it has not freed yet. A broker
makes several such objects per request, and it holds a large, long-lived
heap (modules, topic tables, consumer offsets), so with the default
settings about a tenth of its CPU under load went to the collector: walking
objects that never become garbage. Two settings fix that once the server is
up (Instagram's `gc.freeze` recipe):

- `gc.freeze()` moves everything alive at startup to a permanent
  generation that no pass walks again;
- a higher generation-0 threshold makes passes rarer and each one still
  short, since request objects die young, freed by reference counting.

Cycles are still collected, only later. `TIDEMQ_GC=default` keeps Python's
own settings (to tell the two apart when chasing memory).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping

SERVER_THRESHOLDS = (10_000, 20, 100)
"""Generation 0 every 10,000 new containers (Python: 700); generation 1 every
20 of those (10); generation 2 every 100 generation-1 passes (10), and in any
case only when it has grown by a quarter (CPython's own rule)."""


def collector_choice(environ: Mapping[str, str] | None = None) -> str:
    """ "server" or "default" from TIDEMQ_GC (unset: "server"); ValueError otherwise."""
    env = os.environ if environ is None else environ
    choice = env.get("TIDEMQ_GC", "server").strip().lower()
    if choice not in ("server", "default"):
        raise ValueError(f"TIDEMQ_GC={choice!r}: expected 'server' or 'default'")
    return choice


def settle_collector(environ: Mapping[str, str] | None = None) -> bool:
    """Freeze the startup heap and raise the thresholds; False (nothing
    changed) when TIDEMQ_GC=default asks for Python's settings."""
    if collector_choice(environ) == "default":
        return False
    gc.collect()  # what is garbage now is not frozen with the rest
    gc.freeze()
    gc.set_threshold(*SERVER_THRESHOLDS)
    return True
