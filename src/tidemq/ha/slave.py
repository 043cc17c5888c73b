"""The slave's end of the HA stream: copy the master's commitlog, report progress.

One owned task (`run`) keeps a connection to the master's HA address
(configured, or learned from the name server's answer to registration, as
RocketMQ's slave learns RegisterBrokerResult.haServerAddr). A connection:

1. reports the slave's commitlog end (8 bytes), where the master starts;
2. applies each transfer as `decisions.on_transfer` says: append the bytes
   at the same offset (`FileMessageStore.append_replicated`, which also
   dispatches the records they complete), begin an empty log at the
   master's first file, truncate a log that is ahead of the master's
   (logged with what was dropped), or refuse and close;
3. reports the new end after what one read brought was applied; a slave in
   sync-flush mode first waits for it to be on disk, so a SYNC_MASTER's
   acknowledgement means "on both disks";
4. reports at least every heartbeat interval, and gives up on a master it has
   heard nothing from for the housekeeping interval.

After a failure it reconnects, waiting 0.2 s doubling up to 5 s between
attempts, and at once when the master's address changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tidemq.common.backoff import doubling_delay
from tidemq.ha.config import HaSettings
from tidemq.ha.decisions import Refuse, StartAt, Truncate, on_transfer
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.ha import Transfer, TransferDecoder, encode_hello, encode_report
from tidemq.store.file_store import FileMessageStore
from tidemq.store.fs import NoSpaceError
from tidemq.store.replica import ReplicaTruncation

__all__ = ["HaClient", "ReplicationStopped"]

log = logging.getLogger(__name__)

_READ_SIZE = 256 * 1024
_FIRST_RETRY_S = 0.2


class ReplicationStopped(Exception):
    """A connection to the master ended; the text says why."""


@dataclass(slots=True)
class _Session:
    """One connection's progress."""

    reported: int
    first: bool = True
    received: int = 0


class HaClient:
    """A slave's replication from its master (see the module docstring)."""

    def __init__(
        self,
        store: FileMessageStore,
        settings: HaSettings,
        *,
        master_address: str | None = None,
        replica_id: int | None = None,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`replica_id` (controller mode): said in a hello before the first
        report; `prepare`: run before each connection (a controller-mode slave
        cuts its commitlog back to what it shares with its master there)."""
        self.store = store
        self.settings = settings
        self.replica_id = replica_id
        self._prepare = prepare
        self._fixed = master_address is not None
        self.master_address = master_address
        """host:port of the master's HA port (None until learned)."""
        self._address_changed = asyncio.Event()
        self._connection: asyncio.StreamWriter | None = None
        self.connected = False
        self.reported = -1
        """The last offset reported to the master."""
        self.truncations: list[ReplicaTruncation] = []
        self.last_error: str | None = None

    def learn_master(self, address: str | None) -> None:
        """The master's HA address from a registration answer (ignored when
        one is configured); a new one ends the current connection."""
        if self._fixed or not address or address == self.master_address:
            return
        previous, self.master_address = self.master_address, address
        log.info("master HA address: %s (was %s)", address, previous or "unknown")
        self._address_changed.set()
        writer = self._connection
        if writer is not None:
            writer.transport.abort()

    async def run(self) -> None:
        """Replicate until cancelled (the broker owns this task)."""
        delay: float | None = None
        while True:
            address = self.master_address
            if address is None:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            self._address_changed.clear()
            progressed = False
            try:
                progressed = await self._session(address)
                reason = "the master closed the connection"
            except ReplicationStopped as exc:
                reason = str(exc)
            except (OSError, ProtocolError, TimeoutError) as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            finally:
                self.connected = False
                self._connection = None
            if progressed:
                delay = None
            delay = doubling_delay(
                delay, first=_FIRST_RETRY_S, maximum=self.settings.reconnect_max_s
            )
            if reason != self.last_error:
                log.warning("replication from %s stopped: %s; retrying", address, reason)
            self.last_error = reason
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._address_changed.wait()

    async def _session(self, address: str) -> bool:
        """One connection; True if the master sent anything."""
        host, _, port = address.rpartition(":")
        settings = self.settings
        async with asyncio.timeout(settings.connect_timeout_s):
            reader, writer = await asyncio.open_connection(host, int(port))
        self._connection = writer
        try:
            return await self._replicate(address, reader, writer)
        finally:
            writer.transport.abort()

    async def _replicate(
        self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        settings = self.settings
        loop = asyncio.get_running_loop()
        decoder = TransferDecoder()
        if self._prepare is not None:
            await self._prepare()
        session = _Session(await self._durable_end())
        if self.replica_id is not None:
            writer.write(encode_hello(self.replica_id))
        writer.write(encode_report(session.reported))
        await writer.drain()
        self.reported = session.reported
        self.connected = True
        if self.last_error is not None:
            log.info("replicating from %s again, from offset %d", address, session.reported)
            self.last_error = None
        else:
            log.info("replicating from %s, from offset %d", address, session.reported)
        last_read = last_report = loop.time()
        while True:
            due = settings.heartbeat_interval_s - (loop.time() - last_report)
            try:
                async with asyncio.timeout(max(due, 0.0)):
                    data = await reader.read(_READ_SIZE)
            except TimeoutError:
                silent = loop.time() - last_read
                if silent > settings.housekeeping_interval_s:
                    raise ReplicationStopped(
                        f"nothing from the master for {silent:.0f} s"
                    ) from None
                await self._report(writer, session, session.reported)
                last_report = loop.time()
                continue
            if not data:
                return session.received > 0
            last_read = loop.time()
            for transfer in decoder.feed(data):
                self._apply(transfer, session)
            end = self.store.commitlog.max_offset
            if end != session.reported:
                await self._report(writer, session, await self._durable_end())
                last_report = loop.time()

    def _apply(self, transfer: Transfer, session: _Session) -> None:
        store = self.store
        log_files = store.commitlog.log
        decision = on_transfer(
            transfer.offset,
            slave_min=log_files.min_offset,
            slave_end=log_files.max_offset,
            slave_empty=not log_files.files,
            first=session.first,
            file_size=log_files.file_size,
        )
        session.first = False
        if isinstance(decision, Refuse):
            raise ReplicationStopped(decision.reason)
        if isinstance(decision, Truncate):
            self.truncations.append(store.truncate_replica(decision.offset))
        elif isinstance(decision, StartAt):
            log.info(
                "this slave's commitlog begins at the master's oldest file, %d", decision.offset
            )
        if transfer.body:
            try:
                store.append_replicated(transfer.offset, transfer.body)
            except NoSpaceError as exc:
                raise ReplicationStopped(f"no room on this slave's disk: {exc}") from None
            session.received += len(transfer.body)

    async def _durable_end(self) -> int:
        """The commitlog end to report: in sync-flush mode once it is on disk."""
        store = self.store
        end = store.commitlog.max_offset
        if store.flush.sync_mode and not await store.flush.wait_async(end):
            raise ReplicationStopped("this slave's commitlog could not be flushed")
        return end

    async def _report(self, writer: asyncio.StreamWriter, session: _Session, offset: int) -> None:
        writer.write(encode_report(offset))
        await writer.drain()
        session.reported = offset
        self.reported = offset
