"""Timer test helpers: a real FileMessageStore in tmp_path, a manual clock, and a
TimerService wired as the broker wires it (arrival listener, batch put)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tidemq.common.clock import ManualClock
from tidemq.record.codec import decode_records
from tidemq.store.api import GetStatus
from tidemq.store.config import FlushMode
from tidemq.store.file_store import FileMessageStore
from tidemq.testing.stores import make_message, small_config
from tidemq.testing.waiting import eventually
from tidemq.timer import TimerService, TimerSettings, park
from tidemq.timer.service import InheritedProgress

TOPIC = "TimerTarget"
START_MS = 1_700_000_000_000


def delivered_keys(store: FileMessageStore, topic: str = TOPIC, queue_id: int = 0) -> list[str]:
    """UNIQ_KEY of every record in topic/queue_id, in queue order."""
    keys: list[str] = []
    offset = 0
    while True:
        result = store.get_messages("test", topic, queue_id, offset, 256)
        if result.status is not GetStatus.FOUND:
            return keys
        keys.extend(m.properties.get("UNIQ_KEY", "") for m in decode_records(result.body()))
        offset = result.next_begin_offset


@dataclass
class TimerRig:
    root: Path
    clock: ManualClock
    settings: TimerSettings
    flush_mode: FlushMode = FlushMode.ASYNC
    store: FileMessageStore | None = None
    service: TimerService | None = None
    services: list[TimerService] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        """The timer's own files."""
        return self.root / "store" / "timer"

    def open_store(self) -> FileMessageStore:
        config = small_config(self.root / "store", flush_mode=self.flush_mode)
        store = FileMessageStore(config, clock=self.clock)
        store.open()
        self.store = store
        return store

    async def start(
        self, settings: TimerSettings | None = None, inherited: InheritedProgress | None = None
    ) -> TimerService:
        store = self.store or self.open_store()
        service = TimerService(
            store,
            self.directory,
            self.clock,
            store.put_messages,
            settings or self.settings,
            inherited,
        )
        store.add_arrival_listener(service.on_arrival)
        await service.start()
        self.service = service
        self.services.append(service)
        return service

    async def stop(self, *, close_store: bool = True) -> None:
        if self.service is not None:
            await self.service.stop()
            self.service = None
        if close_store and self.store is not None:
            self.store.close()
            self.store = None

    async def park(self, key: str, deliver_ms: int, topic: str = TOPIC, **kw: object) -> None:
        assert self.store is not None
        message = make_message(topic, f"body-{key}", unique_key=key, **kw)  # type: ignore[arg-type]
        result = await self.store.put_message(park(message, deliver_ms))
        assert result.ok, result

    def advance_to(self, now_ms: int) -> None:
        self.clock.advance((now_ms - self.clock.now_ms()) / 1000)
        if self.service is not None:
            self.service.wake()

    async def settle(self) -> None:
        """Wait until the delivery loop has looked at the current time twice
        (so whatever is due now was taken): the condition a "not delivered
        yet" assertion needs."""
        assert self.service is not None
        service = self.service
        target = service.stats()["dispatch_passes"] + 2
        self.service.wake()
        await eventually(
            lambda: service.stats()["dispatch_passes"] >= target, "two dispatch passes"
        )

    def keys(self, topic: str = TOPIC) -> list[str]:
        assert self.store is not None
        return delivered_keys(self.store, topic)
