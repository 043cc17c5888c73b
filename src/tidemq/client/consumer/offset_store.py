"""Where a consumer keeps its consumed positions (Java's OffsetStore).

* :class:`BrokerOffsetStore` (clustering): the group's offsets live on the
  brokers; reads ask QUERY_CONSUMER_OFFSET (14), persisting sends
  UPDATE_CONSUMER_OFFSET (15) to the queue's master (oneway for periodic
  commits, as Java does; awaited when the caller needs to know).
* :class:`LocalFileOffsetStore` (broadcasting): every client keeps its own
  offsets in ``<dir>/<client id>/<group>/offsets.json``.

Offsets are "next offset to consume". An offset in memory is what the
consumer has reached; ``persist`` makes it durable.

File format of the local store (standard JSON, readable)::

    {"offsetTable": {"<topic>@<brokerName>@<queueId>": 42, ...}}

Topic names cannot hold "@" (RocketMQ's topic charset), so the key splits
unambiguously. Java's fastjson form (object keys) is read as well. Each
write is atomic (temporary file, fsync, rename) and the previous file is
kept as ``offsets.json.bak``; a corrupt file falls back to the .bak, and if
that is unusable too the store starts empty with a warning.

Where Java keys the file by the client id (whose default instance name
changes with every process since 4.9.3, so a restarted broadcasting consumer
silently starts over), tidemq keys it by :func:`local_store_owner`: the
client IP and the instance name the user gave, else ``DEFAULT``. So a
broadcasting consumer resumes from its file after a restart by default. Two
live stores of one group may not share a file in one process: the second
one's ``claim`` raises a ClientError asking for distinct instance names.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import re
import weakref
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Protocol

from tidemq.client._core.rebalance import NO_STORED_OFFSET
from tidemq.client._wire import loads_lenient, message_queue_key, remark
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientInstance
from tidemq.common.atomic_file import write_atomically, write_json_atomically
from tidemq.common.message import MessageQueue
from tidemq.protocol import ProtocolError, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
    encode_header,
)

__all__ = [
    "DEFAULT_OFFSET_STORE_DIR",
    "NO_STORED_OFFSET",
    "BrokerOffsetStore",
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "local_store_owner",
    "offset_key",
    "parse_offset_key",
]

log = logging.getLogger(__name__)


def _default_dir() -> Path:
    configured = os.environ.get("TIDEMQ_OFFSET_STORE_DIR")
    return Path(configured) if configured else Path.home() / ".tidemq_offsets"


DEFAULT_OFFSET_STORE_DIR: Path = _default_dir()
"""$TIDEMQ_OFFSET_STORE_DIR, else ~/.tidemq_offsets, as at import; a store
made without a directory reads the variable again when it is created."""
OFFSETS_FILE = "offsets.json"
BACKUP_SUFFIX = ".bak"


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None: ...

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        """-1 when nothing is stored (NO_STORED_OFFSET); READ_FROM_STORE on a
        broker that cannot be reached raises ClientError."""
        ...

    async def persist(self, mq: MessageQueue) -> None: ...

    async def persist_all(self, mqs: Collection[MessageQueue]) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...

    def table(self, topic: str | None = None) -> dict[MessageQueue, int]: ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        """Set the offset of `mq`; with `increase_only` a smaller value is ignored."""
        if offset < 0:
            raise ValueError(f"offset of {mq} must be >= 0, not {offset}")
        current = self._offsets.get(mq)
        if increase_only and current is not None and current >= offset:
            return
        self._offsets[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self._offsets.pop(mq, None)

    def table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {
            mq: offset for mq, offset in self._offsets.items() if topic is None or mq.topic == topic
        }

    def memory(self, mq: MessageQueue) -> int:
        return self._offsets.get(mq, NO_STORED_OFFSET)


# -- clustering -----------------------------------------------------------------------


class BrokerOffsetStore(_MemoryTable):
    """The group's offsets on the brokers (clustering consumers).

    Read from and committed to the queue's master; while the master is not
    in the route, to one of its slaves (RemoteBrokerOffsetStore,
    findBrokerAddressInSubscribe). The offsets held here are committed to the
    master again once it is back, so it takes over what was consumed from the
    slave meanwhile."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self._instance = instance
        self._group = group

    async def load(self) -> None:
        """Nothing to load: offsets are read from the broker queue by queue."""

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.READ_FROM_STORE:
            offset = self.memory(mq)
            if offset >= 0 or how is ReadOffsetType.READ_FROM_MEMORY:
                return offset
        offset = await self._query(mq)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def _query(self, mq: MessageQueue) -> int:
        address = (await self._instance.require_offset_broker(mq.broker_name, mq.topic)).address
        header = QueryConsumerOffsetRequestHeader(
            consumer_group=self._group, topic=mq.topic, queue_id=mq.queue_id
        )
        response = await self._instance.invoke(
            address, RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header)
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return NO_STORED_OFFSET
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(
                f"reading the offset of {self._group} on {_describe(mq)}: {remark(response)}",
                response.code,
            )
        try:
            return decode_header(QueryConsumerOffsetResponseHeader, response.ext_fields).offset
        except ProtocolError as exc:
            raise ClientError(
                f"malformed QUERY_CONSUMER_OFFSET answer from {address}: {exc}",
                ResponseCode.SYSTEM_ERROR,
            ) from None

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Send the offset of `mq` (if any) to its master.

        Oneway (the default, for periodic commits): failures are logged.
        With ``oneway=False`` the broker's answer is awaited and a failure
        raises ClientError.
        """
        offset = self.memory(mq)
        if offset < 0:
            return
        try:
            await self._send(mq, offset, oneway=oneway)
        except ClientError as exc:
            if not oneway:
                raise
            log.warning("committing %s of %s: %s", _describe(mq), self._group, exc)

    async def persist_all(self, mqs: Collection[MessageQueue], *, oneway: bool = True) -> None:
        """Send the offset of every queue of `mqs` held in memory; forget the others.

        As Java's RemoteBrokerOffsetStore.persistAll, an in-memory entry whose
        queue is not in `mqs` is no longer this consumer's and is dropped.
        With ``oneway=False`` every queue is tried and the first failure is
        raised afterwards.
        """
        wanted = set(mqs)
        failures: list[ClientError] = []
        for mq, offset in sorted(self.table().items()):
            if mq not in wanted:
                self.remove(mq)
                continue
            try:
                await self._send(mq, offset, oneway=oneway)
            except ClientError as exc:
                if not oneway:
                    failures.append(exc)
                else:
                    log.warning("committing %s of %s: %s", _describe(mq), self._group, exc)
        if failures:
            raise failures[0]

    async def _send(self, mq: MessageQueue, offset: int, *, oneway: bool) -> None:
        address = (await self._instance.require_offset_broker(mq.broker_name, mq.topic)).address
        fields = encode_header(
            UpdateConsumerOffsetRequestHeader(
                consumer_group=self._group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                commit_offset=offset,
            )
        )
        if oneway:
            await self._instance.invoke_oneway(address, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
            return
        response = await self._instance.invoke(address, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(
                f"committing {_describe(mq)} of {self._group}: {remark(response)}", response.code
            )


# -- broadcasting ---------------------------------------------------------------------

_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._@#-]")


def _safe_name(text: str) -> str:
    """`text` usable as one path component (":" and "/" of ids replaced by "_")."""
    cleaned = _UNSAFE_PATH_CHARS.sub("_", text)
    return "_" + cleaned if cleaned in ("", ".", "..") else cleaned


def offset_key(mq: MessageQueue) -> str:
    """The file's key of `mq`: "<topic>@<brokerName>@<queueId>"."""
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


def parse_offset_key(key: str) -> MessageQueue:
    """Inverse of :func:`offset_key`; Java's object-key text is accepted too."""
    if key.startswith("{"):
        return message_queue_key(key)
    topic, sep, rest = key.partition("@")
    broker_name, sep2, queue_id = rest.rpartition("@")
    if not (sep and sep2 and topic and broker_name):
        raise ValueError(f"not a <topic>@<broker>@<queueId> key: {key[:80]!r}")
    try:
        return MessageQueue(topic, broker_name, int(queue_id))
    except ValueError:
        raise ValueError(f"bad queue id in offset key {key[:80]!r}") from None


def _parse_table(data: bytes) -> dict[MessageQueue, int]:
    """The offsetTable of an offsets.json; ValueError when malformed."""
    document = loads_lenient(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    raw = document.get("offsetTable")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("offsetTable is not an object")
    table: dict[MessageQueue, int] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"offset of {key[:80]!r} is not a non-negative integer")
        table[parse_offset_key(key)] = value
    return table


DEFAULT_OWNER_INSTANCE = "DEFAULT"

_files_in_use: weakref.WeakValueDictionary[Path, LocalFileOffsetStore] = (
    weakref.WeakValueDictionary()
)
"""Offsets files held by live stores of this process (released at shutdown)."""


def local_store_owner(client_ip: str, instance_name: str | None) -> str:
    """The directory name of a client's local offsets: stable across restarts."""
    return f"{client_ip}@{instance_name or DEFAULT_OWNER_INSTANCE}"


class LocalFileOffsetStore(_MemoryTable):
    """This client's own offsets in a local JSON file (broadcasting consumers).

    The file always holds the whole in-memory table; ``persist`` and
    ``persist_all`` write it when it changed since the last write.
    """

    def __init__(self, group: str, client_id: str, directory: Path | None = None) -> None:
        super().__init__()
        self._group = group
        base = _default_dir() if directory is None else Path(directory)
        self.path = base / _safe_name(client_id) / _safe_name(group) / OFFSETS_FILE
        self.backup_path = self.path.with_name(OFFSETS_FILE + BACKUP_SUFFIX)
        self._written: dict[MessageQueue, int] | None = None
        self._write_lock = asyncio.Lock()

    def claim(self) -> None:
        """Hold the file for this store in this process (consumers do, at start).

        A file another live store holds raises ClientError: two consumers
        would overwrite each other's progress. :meth:`release` gives it back.
        """
        key = self.path.resolve()
        holder = _files_in_use.get(key)
        if holder is not None and holder is not self:
            raise ClientError(
                f"another broadcasting consumer of group {self._group} in this process "
                f"keeps its offsets in {self.path}; give each consumer its own instance_name",
                ResponseCode.SYSTEM_ERROR,
            )
        _files_in_use[key] = self

    async def load(self) -> None:
        """Read the file (or its .bak) into memory; entries in memory are replaced."""
        table = self._read_file()
        for mq, offset in table.items():
            self.update(mq, offset)
        self._written = dict(table)

    def release(self) -> None:
        """Let another store of this process use the file (after the final persist)."""
        key = self.path.resolve()
        if _files_in_use.get(key) is self:
            del _files_in_use[key]

    def _read_file(self) -> dict[MessageQueue, int]:
        for candidate in (self.path, self.backup_path):
            try:
                data = candidate.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot read offsets file %s: %s", candidate, exc)
                continue
            try:
                return _parse_table(data)
            except (ValueError, UnicodeDecodeError) as exc:
                log.warning("offsets file %s is corrupt (%s); trying the backup", candidate, exc)
        if self.path.exists() or self.backup_path.exists():
            log.warning(
                "no usable offsets file for group %s in %s: starting empty",
                self._group,
                self.path.parent,
            )
        return {}

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.READ_FROM_STORE:
            offset = self.memory(mq)
            if offset >= 0 or how is ReadOffsetType.READ_FROM_MEMORY:
                return offset
        offset = self._read_file().get(mq, NO_STORED_OFFSET)
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Write the file (it holds every queue; `oneway` is accepted for symmetry)."""
        await self._write()

    async def persist_all(self, mqs: Collection[MessageQueue], *, oneway: bool = True) -> None:
        """Write the file (it holds every queue in memory, not only `mqs`)."""
        await self._write()

    async def _write(self) -> None:
        async with self._write_lock:
            table = self.table()
            if table == self._written:
                return
            await asyncio.to_thread(self._write_files, table)
            self._written = table

    def _write_files(self, table: Mapping[MessageQueue, int]) -> None:
        """Keep the current file (if it is sound) as .bak, then replace it atomically."""
        try:
            current = self.path.read_bytes()
            _parse_table(current)
        except (OSError, ValueError, UnicodeDecodeError):
            current = None
        if current is not None:
            write_atomically(self.backup_path, current)
        document = {"offsetTable": {offset_key(mq): offset for mq, offset in sorted(table.items())}}
        write_json_atomically(self.path, document)


def _describe(mq: MessageQueue) -> str:
    return f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"
