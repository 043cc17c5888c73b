"""A broker's parts over an in-memory store, for unit tests of the broker and
the gRPC endpoint: `assemble` with the test defaults (loopback store host,
port 10911, a manual clock), the tables loaded, no server around it."""

from __future__ import annotations

from pathlib import Path

from tidemq.broker.assembly import BrokerCore, Features, assemble
from tidemq.broker.config import BrokerConfig
from tidemq.common.clock import ManualClock
from tidemq.store.api import MessageStore
from tidemq.store.memory import MemoryMessageStore

NO_FEATURES = Features(delay=False, timers=False, transactions=False, pop=False)
"""The state and processors alone: no delay levels, timers, transactions or POP."""


def memory_core(
    data_dir: Path,
    features: Features = NO_FEATURES,
    *,
    clock: ManualClock | None = None,
    store: MessageStore | None = None,
    **config: object,
) -> tuple[BrokerCore, MessageStore, ManualClock]:
    """(parts, store, clock): `config` goes to BrokerConfig (its data_dir is
    `data_dir`); the store defaults to a MemoryMessageStore on `clock`."""
    clock = clock or ManualClock()
    store = store or MemoryMessageStore(clock=clock)
    core = assemble(
        BrokerConfig(data_dir=data_dir, **config),  # type: ignore[arg-type]
        store,
        store_host=b"\x7f\x00\x00\x01",
        store_port=10911,
        clock=clock,
        features=features,
    )
    core.service.load()
    return core, store, clock
