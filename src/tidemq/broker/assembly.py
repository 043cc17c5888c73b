"""The broker's composition: its parts built in dependency order, each handed
what it uses.

1. the shared state (BrokerService: tables, offsets, clients, long polling,
   statistics over one store);
2. two small pieces the features need of it: a StoreWriter (the store and
   the statistics: where re-stored messages go) and the ConsumeChecks (may a
   group read a topic, with which filter: shared by pull and pop);
3. the features, each with its collaborators: the DelayScheduler (puts due
   messages through the writer), BrokerTimers, BrokerTransactions, BrokerPop;
4. the processors, one per family of request codes, each with the state it
   reads and the features it calls (None when a feature is off).

Nothing is assigned into a part after it is built. The server
(tidemq.server.broker) calls `assemble`, loads the tables, starts the
features and serves `dispatch_table()`; the gRPC endpoint calls the same
processors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consume_checks import ConsumeChecks, SqlFilterFactory
from tidemq.broker.handlers import dispatch_table
from tidemq.broker.pop.engine import BrokerPop
from tidemq.broker.processors.admin import AdminProcessor, StoreInfo
from tidemq.broker.processors.client import ClientProcessor
from tidemq.broker.processors.pop import PopProcessor
from tidemq.broker.processors.pull import PullProcessor
from tidemq.broker.processors.send import SendProcessor
from tidemq.broker.processors.transaction import TransactionProcessor
from tidemq.broker.remoting import Processor, notify_consumer_ids_changed
from tidemq.broker.schedule import DelayScheduler
from tidemq.broker.service import BrokerService
from tidemq.broker.store_writer import StoreWriter
from tidemq.broker.timers import BrokerTimers
from tidemq.broker.transactions import BrokerTransactions
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.message import MAX_MESSAGE_SIZE
from tidemq.store.api import MessageStore
from tidemq.transport import Handler

__all__ = ["ALL_FEATURES", "DELAY_PROGRESS_FILE", "BrokerCore", "Features", "assemble"]

DELAY_PROGRESS_FILE = "delayOffset.json"
"""Under the config directory: the delay scheduler's progress per level."""


@dataclass(frozen=True, slots=True)
class Features:
    """Which optional parts to build (a broker has them all; a test may not)."""

    delay: bool = True
    timers: bool = True
    transactions: bool = True
    pop: bool = True


ALL_FEATURES = Features()


@dataclass(frozen=True, slots=True)
class BrokerCore:
    """One broker's parts, as `assemble` built them."""

    service: BrokerService
    writer: StoreWriter
    checks: ConsumeChecks
    scheduler: DelayScheduler | None
    timers: BrokerTimers | None
    transactions: BrokerTransactions | None
    pop_engine: BrokerPop | None
    send: SendProcessor
    pull: PullProcessor
    client: ClientProcessor
    admin: AdminProcessor
    pop: PopProcessor
    transaction: TransactionProcessor

    def processors(self) -> tuple[Processor, ...]:
        return (self.send, self.pull, self.client, self.admin, self.pop, self.transaction)

    def dispatch_table(self) -> dict[int, Handler]:
        """Request code -> handler, for RemotingServer."""
        return dispatch_table(self.processors())


def assemble(
    config: BrokerConfig,
    store: MessageStore,
    *,
    store_host: bytes,
    store_port: int,
    clock: Clock = SYSTEM_CLOCK,
    max_message_size: int = MAX_MESSAGE_SIZE,
    features: Features = ALL_FEATURES,
    sql_filter_factory: SqlFilterFactory | None = None,
    on_topics_change: Callable[[], None] | None = None,
    store_info: StoreInfo | None = None,
) -> BrokerCore:
    """Build a broker's parts over `store` (see the module docstring). The
    tables are not read yet (`core.service.load()`), nor the features started."""
    service = BrokerService(
        config,
        store,
        store_host=store_host,
        store_port=store_port,
        clock=clock,
        max_message_size=max_message_size,
        on_topics_change=on_topics_change,
        on_group_change=notify_consumer_ids_changed,
    )
    writer = StoreWriter(store, service.stats)
    checks = ConsumeChecks(
        service.topics, service.groups, sql_filter_factory, permission=service.permission
    )

    scheduler = None
    if features.delay:
        scheduler = DelayScheduler(
            store,
            service.delay_levels_ms,
            config.config_dir / DELAY_PROGRESS_FILE,
            clock,
            writer.put_restored,
        )
        store.add_arrival_listener(scheduler.on_arrival)
    timers = BrokerTimers(config, store, clock, service.stats) if features.timers else None
    transactions = None
    if features.transactions:
        transactions = BrokerTransactions(
            config,
            store,
            clock,
            stats=service.stats,
            offsets=service.offsets,
            producers=service.producers,
            store_host=store_host,
            store_port=store_port,
        )
    pop_engine = None
    if features.pop:
        pop_engine = BrokerPop(
            config,
            store,
            clock,
            topics=service.topics,
            groups=service.groups,
            offsets=service.offsets,
            checks=checks,
            put=writer.put_restored,
            stats=service.stats,
        )

    return BrokerCore(
        service=service,
        writer=writer,
        checks=checks,
        scheduler=scheduler,
        timers=timers,
        transactions=transactions,
        pop_engine=pop_engine,
        send=SendProcessor(
            config,
            store,
            service.topics,
            service.groups,
            service.stats,
            scheduler=scheduler,
            timers=timers,
            transactions=transactions,
            max_message_size=max_message_size,
            permission=service.permission,
        ),
        pull=PullProcessor(
            config,
            store,
            service.offsets,
            service.consumers,
            service.stats,
            service.long_polling,
            checks,
        ),
        client=ClientProcessor(
            service.topics, service.groups, service.consumers, service.producers, service.locks
        ),
        admin=AdminProcessor(
            config,
            store,
            clock,
            service.topics,
            service.groups,
            service.offsets,
            service.consumers,
            service.producers,
            service.locks,
            service.stats,
            service.long_polling,
            address=service.address,
            boot_ms=service.boot_ms,
            store_info=store_info,
            delay_offsets=scheduler.encode if scheduler is not None else None,
            permission=service.permission,
        ),
        pop=PopProcessor(pop_engine),
        transaction=TransactionProcessor(config, transactions),
    )
