"""The master's end of the HA stream: accept slaves, send them the commitlog.

For each slave connection (RocketMQ's HAConnection) two owned tasks run:

* the reader takes the slave's reports (`protocol.ha.ReportDecoder`): the
  first says where to start, every one acknowledges (`ReplicaWaits`), and a
  connection with nothing from the slave for the housekeeping interval is
  closed (a slave reports at least every heartbeat interval);
* the sender starts where `decisions.start_offset` says, sends a heartbeat
  at once (so a slave learns the master's position without waiting), then
  the commitlog from there in transfers of at most the batch size, each
  within one file, as soon as they are written (the store calls
  `_written` after every append), and a heartbeat when idle for the
  heartbeat interval.

Either task ending closes the connection and ends the other. The sender
holds no view of a mapped file across an await (`read_chunk` copies).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass, field

from tidemq.common.tasks import TaskSet
from tidemq.ha.config import HaSettings
from tidemq.ha.decisions import start_offset
from tidemq.ha.sync_state import SyncStateWaits
from tidemq.ha.waits import ReplicaWaits
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.ha import HELLO_SIZE, ReportDecoder, decode_hello, encode_transfer_header
from tidemq.store.file_store import FileMessageStore

__all__ = ["HaServer", "SlaveConnection"]

log = logging.getLogger(__name__)

_READ_SIZE = 4096


@dataclass(eq=False)
class SlaveConnection:
    """One slave, as its master sees it."""

    peer: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    requested: int | None = None
    """The offset of the slave's first report."""
    acked: int = -1
    """Its latest report."""
    sent: int = -1
    """The offset the next transfer starts at."""
    replica_id: int | None = None
    """Who it is, from its hello (controller mode)."""
    closed: bool = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.wake.set()
            self.writer.transport.abort()


class HaServer:
    """Listens on the HA port; every slave that connects is sent the commitlog."""

    def __init__(
        self,
        store: FileMessageStore,
        settings: HaSettings,
        waits: ReplicaWaits | None,
        *,
        sync_state: SyncStateWaits | None = None,
    ) -> None:
        """`sync_state`: a controller-mode master's SyncStateSet waits; its
        slaves open with a hello naming their replica id."""
        self.store = store
        self.settings = settings
        self.sync_state = sync_state
        self.waits = waits
        """A SYNC_MASTER's writes waiting for reports (None: nobody waits)."""
        self.connections: set[SlaveConnection] = set()
        self.acked = 0
        """The highest offset any slave reported (RocketMQ's push2SlaveMaxOffset)."""
        self._tasks = TaskSet("ha-server")
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        store.add_write_listener(self._written)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the HA server is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._server = await asyncio.start_server(self._accept, host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        await self._tasks.cancel_all()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self.waits is not None:
            self.waits.close()

    def status(self) -> list[dict[str, object]]:
        """Each slave: address, first and latest report, where sending is, bytes behind."""
        end = self.store.commitlog.max_offset
        return [
            {
                "slave": c.peer,
                "requested": c.requested,
                "acked": c.acked,
                "sent": c.sent,
                "behind": max(0, end - c.acked) if c.acked >= 0 else None,
            }
            for c in sorted(self.connections, key=lambda c: c.peer)
        ]

    # -- connections -------------------------------------------------------------------

    def _written(self) -> None:
        """The store appended: wake every sender (from any thread)."""
        loop = self._loop
        if loop is None or not self.connections:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_all()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for connection in self.connections:
            connection.wake.set()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        connection = SlaveConnection(name, reader, writer)
        self.connections.add(connection)
        log.info("slave %s connected to the HA port", name)
        self._tasks.spawn(self._serve(connection))

    async def _serve(self, connection: SlaveConnection) -> None:
        reports = self._tasks.spawn(self._read_reports(connection))
        try:
            await self._send(connection)
        except (ConnectionError, OSError) as exc:
            if not connection.closed:
                log.warning("HA connection to slave %s failed: %s", connection.peer, exc)
        finally:
            connection.close()
            reports.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reports
            self.connections.discard(connection)
            if self.sync_state is not None and connection.replica_id is not None:
                self.sync_state.disconnected(connection.replica_id)
            if connection.requested is not None and self.waits is not None:
                self.waits.reporting_slaves -= 1
            log.info("slave %s disconnected (acknowledged %d)", connection.peer, connection.acked)

    async def _read_reports(self, connection: SlaveConnection) -> None:
        decoder = ReportDecoder()
        silence = self.settings.housekeeping_interval_s
        try:
            if self.sync_state is not None:
                async with asyncio.timeout(silence):
                    hello = await connection.reader.readexactly(HELLO_SIZE)
                connection.replica_id = decode_hello(hello)
                log.info("slave %s is replica %d", connection.peer, connection.replica_id)
            while not connection.closed:
                try:
                    async with asyncio.timeout(silence):
                        data = await connection.reader.read(_READ_SIZE)
                except TimeoutError:
                    log.warning(
                        "slave %s sent nothing for %.0f s: closing its HA connection",
                        connection.peer,
                        silence,
                    )
                    return
                if not data:
                    return
                offset = decoder.feed(data)
                if offset is not None:
                    self._report(connection, offset)
        except ProtocolError as exc:
            log.warning("slave %s: %s", connection.peer, exc)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            connection.close()

    def _report(self, connection: SlaveConnection, offset: int) -> None:
        connection.acked = offset
        if connection.requested is None:
            connection.requested = offset
            if self.waits is not None:
                self.waits.reporting_slaves += 1
            connection.wake.set()
        if offset > self.acked:
            self.acked = offset
        sync_state = self.sync_state
        if sync_state is not None and connection.replica_id is not None:
            loop = asyncio.get_running_loop()
            end = self.store.commitlog.max_offset
            sync_state.report(connection.replica_id, offset, end, loop.time())
        elif self.waits is not None:
            self.waits.acknowledge(offset)

    async def _send(self, connection: SlaveConnection) -> None:
        while connection.requested is None:
            if connection.closed:
                return
            connection.wake.clear()
            await connection.wake.wait()
        store = self.store
        commitlog = store.commitlog
        position = start_offset(connection.requested, commitlog.min_offset, commitlog.max_offset)
        log.info(
            "slave %s has the commitlog up to %d: sending from %d (the master ends at %d)",
            connection.peer,
            connection.requested,
            position,
            commitlog.max_offset,
        )
        connection.sent = position
        writer = connection.writer
        settings = self.settings
        loop = asyncio.get_running_loop()
        writer.write(encode_transfer_header(position, 0))
        await writer.drain()
        last_write = loop.time()
        while not connection.closed:
            connection.wake.clear()
            chunk = store.replication_data(position, settings.transfer_batch_size)
            if chunk is None:
                log.error(
                    "slave %s needs commitlog offset %d, which this master no longer has "
                    "(it holds [%d, %d)): closing the connection",
                    connection.peer,
                    position,
                    commitlog.min_offset,
                    commitlog.max_offset,
                )
                return
            if chunk:
                writer.write(encode_transfer_header(position, len(chunk)))
                writer.write(chunk)
                position += len(chunk)
                connection.sent = position
                await writer.drain()
                last_write = loop.time()
                continue
            idle = settings.heartbeat_interval_s - (loop.time() - last_write)
            if idle <= 0:
                writer.write(encode_transfer_header(position, 0))
                await writer.drain()
                last_write = loop.time()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(idle):
                    await connection.wake.wait()
