"""RocketMQ's index files: a hash index from `topic#key` to commitlog offsets.

Every stored message is indexed under its unique key (UNIQ_KEY) and each
space-separated key of its KEYS property, so that messages can be found by key
within a store-time range. Files are named by their creation time
(`yyyyMMddHHmmssSSS`, local time) and hold this layout, big-endian throughout:

| bytes (E = 40 + 4*slots + 20*n) | field |
|---------|-------|
| 0-7     | beginTimestamp (int64): store time of the first entry, ms |
| 8-15    | endTimestamp (int64): latest store time of any entry, ms |
| 16-23   | beginPhyOffset (int64): commitlog offset of the first entry |
| 24-31   | endPhyOffset (int64): commitlog offset of the last entry |
| 32-35   | hashSlotCount (int32): slots in use |
| 36-39   | indexCount (int32): next entry number; starts at 1 |
| 40+4*s  | slot `s` (int32): newest entry hashed to it, 0 = none |
| E+0-3   | entry `n` keyHash (int32): abs(Java hashCode), 0 if abs overflows |
| E+4-11  | entry `n` phyOffset (int64) |
| E+12-15 | entry `n` timeDiff (int32): whole seconds after beginTimestamp |
| E+16-19 | entry `n` prevIndex (int32): the slot's previous newest entry |

Entry 0 is never used, so a file of `max_index_count` entries holds one
fewer. A key's slot is `keyHash % slots`; its entries form a chain from the
slot through `prevIndex`, newest first. Store times come back at whole-second
precision (`beginTimestamp + timeDiff * 1000`).

Durability: the header (all but beginTimestamp, written once with the first
entry) is rewritten after each message's entries, so one sync makes entries
and header durable together, and a header on disk never counts entries that
were not written before it. After a crash, files that may hold entries past
the index checkpoint are deleted and rebuilt by re-dispatch; slots of the
newest surviving file are checked, since they may point at lost entries.

As in RocketMQ, rolled-back transaction messages are not indexed (prepared
ones are, under the half topic they are stored in). Deviations from RocketMQ,
all for safe recovery: a message's keys never straddle two files (unless they
outnumber a file's capacity); `build` skips offsets up to and including the
last indexed one, so re-dispatch adds nothing; endTimestamp is the maximum
store time rather than the last one; a crash is judged by the checkpoint's
commitlog offset rather than its timestamp.

Disk space: an index file is created sparse; its header and slots (written at
random) get their blocks when the file is created, its entries (written in
order) a chunk ahead, so a put never writes a page without a block (on a full
disk that is SIGBUS). `IndexService.reserve` makes room for a batch's entries
before the store writes the batch, creating the next file ahead if the batch
will need it.

Making a file ahead: a new file's slots are mapped when it is made
(MADV_POPULATE_WRITE, so that random slot writes do not fault page by page).
For RocketMQ's 5 million slots that maps 20 MB, 20-30 ms on the project's
machine, and Python's `mmap.madvise` holds the GIL meanwhile: made on the
store's thread when the first message (or the first past a full file) needs
it, it stalled the event loop, and every message behind it, for that long.
So a file whose slots take `make_ahead_min_slot_bytes` or more is made ahead:
at open (`make_ahead`, on the thread that opens the store, before any
message), and when the newest file has less than a tenth of its entries
free, on a thread of its own, which maps the slots a slice at a time with a
pause between slices, so that the event loop waits for one slice at most.
The store's thread takes it when it needs it (waiting for it if it is still
being made, never making a second one). A made-ahead file left unused is
removed at close; one left by a crash (a header of zeros: no entry was ever
written to it) is removed at load, without any rebuild. Smaller files are
made when needed, as before.
"""

from __future__ import annotations

import bisect
import logging
import re
import struct
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tidemq.common import sysflag
from tidemq.common.clock import Clock
from tidemq.common.hashing import java_string_hash_shared_prefix, java_string_hash_uncached
from tidemq.record.native import compiled
from tidemq.store.api import DispatchRequest
from tidemq.store.fs import FileSystem, MmapFile, NoSpaceError, StoreFile
from tidemq.store.space import DEFAULT_RESERVE_CHUNK, reservation_end

log = logging.getLogger(__name__)

_compiled_append = compiled("_append")
"""The compiled index writer (`index_put_run`), or None: `IndexFile.put` per entry."""

HEADER = struct.Struct(">qqqqii")
HEADER_SIZE = HEADER.size
HEADER_TAIL = struct.Struct(">qqqii")
"""The header without beginTimestamp, which is written once with the first entry:
later header writes cannot damage it, even torn."""
HEADER_TAIL_POS = 8
BEGIN_TIMESTAMP = struct.Struct(">q")
SLOT = struct.Struct(">i")
SLOT_SIZE = SLOT.size
ENTRY = struct.Struct(">iqii")
ENTRY_SIZE = ENTRY.size
ENTRY_WORDS = ENTRY_SIZE // 4
PACKED_ENTRY = struct.Struct(">qi")
"""An index entry as a batch append hands it over: physical offset, key hash."""
CHUNK_ENTRIES = 1 << 16

NO_ENTRY = 0
FIRST_ENTRY = 1
INT32_MAX = 0x7FFF_FFFF
KEY_SEPARATOR = " "
FILE_NAME = re.compile(r"\d{17}")

SKIPPED_TRANSACTION_TYPES = frozenset({sysflag.TRANSACTION_ROLLBACK_TYPE})
"""RocketMQ's IndexService skips only rolled-back messages (prepared half
messages are indexed, under the half topic they are stored in)."""

_java_hash: Callable[[str], int] = java_string_hash_uncached
"""The hash without its cache: unique keys never repeat and would only evict
the tags that cache exists for."""


def index_key_hash(topic: str, key: str) -> int:
    """RocketMQ's keyHash of `topic#key`: abs of Java's hashCode, 0 when abs overflows."""
    positive = abs(_java_hash(f"{topic}#{key}"))
    return 0 if positive > INT32_MAX else positive


def unique_key_hash(topic: str, unique_key: str) -> int:
    """`index_key_hash` for a unique id: ids of one producer share their first
    20 characters, whose part of the hash is cached."""
    positive = abs(java_string_hash_shared_prefix(f"{topic}#{unique_key}"))
    return 0 if positive > INT32_MAX else positive


MAKE_AHEAD_MIN_SLOT_BYTES = 1 << 20
"""Files whose slots take this many bytes or more are made ahead (mapping a
MiB of slots takes about a millisecond here); smaller ones when needed."""
MAKE_AHEAD_FREE_FRACTION = 10
"""The next file is made once the newest has less than 1/10 of its entries free."""
PREFAULT_SLICE_BYTES = 256 << 10
"""Slots mapped per call when a file is made ahead: the GIL is held for one
slice (a fraction of a millisecond), then let go during the pause."""
PREFAULT_PAUSE_S = 0.0005
"""The pause after each slice: a real sleep, so that a thread waiting for the
GIL takes it (a zero sleep lets go of it, but this thread usually takes it
back first)."""


def _pause() -> None:
    time.sleep(PREFAULT_PAUSE_S)


def file_size(max_hash_slots: int, max_index_count: int) -> int:
    return HEADER_SIZE + max_hash_slots * SLOT_SIZE + max_index_count * ENTRY_SIZE


def file_name_for(now_ms: int) -> str:
    """`yyyyMMddHHmmssSSS` in local time, as RocketMQ names index files."""
    seconds, millis = divmod(now_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"


def _big_endian_words(data: bytes | memoryview) -> array[int]:
    """int32 words of big-endian `data`, for scanning many slots or entries at C speed."""
    words = array("i")
    words.frombytes(data)
    if sys.byteorder == "little":
        words.byteswap()
    return words


def _words_to_bytes(words: array[int]) -> bytes:
    copy = array("i", words)
    if sys.byteorder == "little":
        copy.byteswap()
    return copy.tobytes()


@dataclass(slots=True)
class Header:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = FIRST_ENTRY


class IndexFile:
    """One index file: the header mirrored in memory, slots and entries in the file."""

    __slots__ = (
        "_direct",
        "_entries_pos",
        "_room_end",
        "_view",
        "capacity",
        "header",
        "needs_dir_sync",
        "slot_count",
        "store",
        "unsynced",
    )

    def __init__(self, store: StoreFile, slot_count: int, capacity: int) -> None:
        self.store = store
        self.slot_count = slot_count
        self.capacity = capacity
        self.header = Header()
        self._entries_pos = HEADER_SIZE + slot_count * SLOT_SIZE
        self._view = store.view(0, store.size)
        # Pack straight into a shared mapping (puts are the hot path); other
        # files, the fault-injecting ones included, see every write via `write`.
        self._direct = isinstance(store, MmapFile)
        self._room_end = store.reserved
        """Bytes below this have blocks (a copy of the file's, kept for `put`)."""
        self.unsynced = False
        self.needs_dir_sync = False

    def read_header(self) -> None:
        self.header = Header(*HEADER.unpack_from(self._view, 0))

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def is_empty(self) -> bool:
        return self.header.index_count <= FIRST_ENTRY

    @property
    def free(self) -> int:
        return self.capacity - self.header.index_count

    # -- writing ------------------------------------------------------------

    def reserve(self, count: int) -> None:
        """Blocks for the header, the slots and `count` more entries, a chunk
        of entries ahead (NoSpaceError when the disk is full)."""
        end = self._entries_pos + (self.header.index_count + count) * ENTRY_SIZE
        if end > self._room_end:
            size = self.store.size
            end = min(size, end)
            self.store.reserve(end, reservation_end(end, size, DEFAULT_RESERVE_CHUNK))
            self._room_end = self.store.reserved

    def put(self, key_hash: int, phy_offset: int, store_timestamp: int) -> None:
        """Append one entry at the head of its slot's chain; the caller then
        writes the header (once per message) and checks `free` beforehand."""
        header = self.header
        number = header.index_count
        if self._entries_pos + (number + 1) * ENTRY_SIZE > self._room_end:
            self.reserve(1)  # before any byte is written
        if number == FIRST_ENTRY:
            # Written once: later (possibly torn) header writes skip it.
            header.begin_timestamp = store_timestamp
            header.begin_phy_offset = phy_offset
            self._pack(0, BEGIN_TIMESTAMP, store_timestamp)
        slot_pos = HEADER_SIZE + (key_hash % self.slot_count) * SLOT_SIZE
        head = SLOT.unpack_from(self._view, slot_pos)[0]
        if head <= NO_ENTRY or head >= number:
            head = NO_ENTRY
            header.hash_slot_count += 1
        diff = (store_timestamp - header.begin_timestamp) // 1000
        diff = 0 if diff < 0 else INT32_MAX if diff > INT32_MAX else diff
        entry_pos = self._entries_pos + number * ENTRY_SIZE
        if self._direct:
            ENTRY.pack_into(self._view, entry_pos, key_hash, phy_offset, diff, head)
            SLOT.pack_into(self._view, slot_pos, number)
        else:
            self.store.write(entry_pos, ENTRY.pack(key_hash, phy_offset, diff, head))
            self.store.write(slot_pos, SLOT.pack(number))
        header.index_count = number + 1
        header.end_phy_offset = phy_offset
        if store_timestamp > header.end_timestamp:
            header.end_timestamp = store_timestamp

    def put_run(self, entries: bytes, store_timestamp: int) -> None:
        """`put` for each packed entry (`PACKED_ENTRY`: physical offset, key
        hash) in order, in one compiled call when the file is mapped and
        its room reserved; the caller checks `free` and writes the header."""
        count = len(entries) // PACKED_ENTRY.size
        header = self.header
        if (
            _compiled_append is not None
            and self._direct
            and self._entries_pos + (header.index_count + count) * ENTRY_SIZE <= self._room_end
        ):
            fields = _compiled_append.index_put_run(
                self._view,
                self.slot_count,
                self._entries_pos,
                (
                    header.begin_timestamp,
                    header.end_timestamp,
                    header.begin_phy_offset,
                    header.end_phy_offset,
                    header.hash_slot_count,
                    header.index_count,
                ),
                entries,
                store_timestamp,
            )
            self.header = Header(*fields)
            return
        for phy_offset, key_hash in PACKED_ENTRY.iter_unpack(entries):
            self.put(key_hash, phy_offset, store_timestamp)

    def write_header(self) -> None:
        """Write every header field but beginTimestamp (see `put`)."""
        h = self.header
        self._pack(
            HEADER_TAIL_POS,
            HEADER_TAIL,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.hash_slot_count,
            h.index_count,
        )
        self.unsynced = True

    def _pack(self, pos: int, layout: struct.Struct, *values: int) -> None:
        if self._direct:
            layout.pack_into(self._view, pos, *values)
        else:
            self.store.write(pos, layout.pack(*values))

    # -- reading ------------------------------------------------------------

    def entry(self, number: int) -> tuple[int, int, int, int]:
        """(keyHash, phyOffset, timeDiff, prevIndex) of entry `number`."""
        fields: tuple[int, int, int, int] = ENTRY.unpack_from(
            self._view, self._entries_pos + number * ENTRY_SIZE
        )
        return fields

    def slot_head(self, key_hash: int) -> int:
        pos = HEADER_SIZE + (key_hash % self.slot_count) * SLOT_SIZE
        if pos + SLOT_SIZE > self._room_end and not self.store.data_ranges(pos, pos + SLOT_SIZE):
            return NO_ENTRY  # a hole (a sparse file from before slots were reserved)
        head: int = SLOT.unpack_from(self._view, pos)[0]
        return head

    def overlaps(self, begin_ms: int, end_ms: int) -> bool:
        h = self.header
        return begin_ms <= h.end_timestamp and end_ms >= h.begin_timestamp

    def collect(
        self,
        key_hash: int,
        begin_ms: int,
        end_ms: int,
        max_num: int,
        found: list[int],
        seen: set[int],
        below_offset: int | None = None,
    ) -> None:
        """Walk the key's chain newest first, adding matching offsets not seen yet
        (and below `below_offset`, when given).

        The walk stops at an entry older than `begin_ms` (store times grow
        along the commitlog) and at any link that does not point to an older
        entry, so a damaged chain cannot loop.
        """
        count = self.header.index_count
        begin_timestamp = self.header.begin_timestamp
        number = self.slot_head(key_hash)
        while NO_ENTRY < number < count and len(found) < max_num:
            entry_hash, phy_offset, diff, prev = self.entry(number)
            if diff < 0:
                break
            stored_ms = begin_timestamp + diff * 1000
            if (
                entry_hash == key_hash
                and begin_ms <= stored_ms <= end_ms
                and (below_offset is None or phy_offset < below_offset)
                and phy_offset not in seen
            ):
                seen.add(phy_offset)
                found.append(phy_offset)
            if stored_ms < begin_ms or prev >= number:
                break
            number = prev

    # -- recovery -----------------------------------------------------------

    def consistency_problem(self) -> str | None:
        """Why this header cannot be trusted, or None: counts in range, offsets
        ordered, and the first and last entries agree with the header."""
        h = self.header
        if not FIRST_ENTRY < h.index_count <= self.capacity:
            return f"indexCount {h.index_count} outside (1, {self.capacity}]"
        if h.hash_slot_count < 0:
            return f"hashSlotCount {h.hash_slot_count} negative"
        if not 0 <= h.begin_phy_offset <= h.end_phy_offset:
            return f"phy offsets {h.begin_phy_offset}..{h.end_phy_offset} out of order"
        if h.begin_timestamp > h.end_timestamp:
            return f"timestamps {h.begin_timestamp}..{h.end_timestamp} out of order"
        if self.entry(FIRST_ENTRY)[1] != h.begin_phy_offset:
            return "first entry disagrees with beginPhyOffset"
        if self.entry(h.index_count - 1)[1] != h.end_phy_offset:
            return "last entry disagrees with endPhyOffset"
        return None

    def _slot_words(self) -> array[int]:
        """Every slot, holes read as zeros without touching them."""
        if self._entries_pos <= self._room_end:
            return _big_endian_words(self._view[HEADER_SIZE : self._entries_pos])
        slots = bytearray(self._entries_pos - HEADER_SIZE)
        for start, end in self.store.data_ranges(HEADER_SIZE, self._entries_pos):
            slots[start - HEADER_SIZE : end - HEADER_SIZE] = self._view[start:end]
        return _big_endian_words(bytes(slots))

    def _entry_chunks(self, count: int) -> Iterator[tuple[int, array[int]]]:
        """(first entry number, int32 words) for entries below `count`, a
        chunk at a time: a full default file has 400 MB of entries."""
        for first in range(0, count, CHUNK_ENTRIES):
            last = min(count, first + CHUNK_ENTRIES)
            start = self._entries_pos + first * ENTRY_SIZE
            end = self._entries_pos + last * ENTRY_SIZE
            yield first, _big_endian_words(self._view[start:end])

    def _max_time_diff(self, count: int) -> int:
        """The largest timeDiff below `count` (entry 0, unused, reads as 0)."""
        return max(max(words[3::ENTRY_WORDS]) for _, words in self._entry_chunks(count))

    def repair_after_crash(self) -> bool:
        """Undo writes that outlived the header after a crash; True if any.

        Slots are rewritten without the header, so a slot may point at an
        entry the header does not count (lost or torn). Every slot must name
        an entry below indexCount whose hash belongs to it; if one does not,
        all slot heads are rebuilt from the counted entries, which are durable.
        endTimestamp is likewise checked against the entries' times.
        """
        count = self.header.index_count
        repaired = False
        if not self._slots_agree(count):
            self._rebuild_slots(count)
            repaired = True
        if self._fix_end_timestamp(self._max_time_diff(count)):
            repaired = True
        if repaired:
            self.write_header()
        return repaired

    def _slots_agree(self, count: int) -> bool:
        slots = self._slot_words()
        if min(slots) < NO_ENTRY or max(slots) >= count:
            return False
        unpack, view, base = SLOT.unpack_from, self._view, self._entries_pos
        modulus = self.slot_count
        for slot, number in enumerate(slots):
            if number and unpack(view, base + number * ENTRY_SIZE)[0] % modulus != slot:
                return False
        return True

    def _rebuild_slots(self, count: int) -> None:
        """Point each slot at its newest entry (entry 0 reads as hash 0 and
        sets slot 0 to 0, which any real entry of slot 0 then overrides)."""
        modulus = self.slot_count
        heads = array("i", bytes(modulus * SLOT_SIZE))
        for first, words in self._entry_chunks(count):
            for number, key_hash in enumerate(words[0::ENTRY_WORDS], first):
                heads[key_hash % modulus] = number
        self.store.write(HEADER_SIZE, _words_to_bytes(heads))
        self.header.hash_slot_count = modulus - heads.count(NO_ENTRY)

    def _fix_end_timestamp(self, max_diff: int) -> bool:
        """endTimestamp must fall within the second of the newest entry's time."""
        h = self.header
        lowest = h.begin_timestamp + max_diff * 1000
        if lowest <= h.end_timestamp < lowest + 1000:
            return False
        h.end_timestamp = lowest + 999
        return True

    def truncate_entries_from(self, phy_offset: int) -> int:
        """Forget entries at or past `phy_offset`; returns how many.

        Entries are in commitlog order, so they are a tail. Each removed
        entry is the head of its chain when it is reached newest first, so
        its slot falls back to its prevIndex.
        """
        h = self.header
        count = h.index_count
        cut = bisect.bisect_left(range(count), phy_offset, lo=FIRST_ENTRY, key=self._phy_at)
        if cut >= count:
            return 0
        modulus = self.slot_count
        for number in range(count - 1, cut - 1, -1):
            key_hash, _, _, prev = self.entry(number)
            slot_pos = HEADER_SIZE + (key_hash % modulus) * SLOT_SIZE
            if SLOT.unpack_from(self._view, slot_pos)[0] == number:
                new_head = prev if NO_ENTRY < prev < number else NO_ENTRY
                self.store.write(slot_pos, SLOT.pack(new_head))
                if new_head == NO_ENTRY:
                    h.hash_slot_count -= 1
        h.index_count = cut
        if cut > FIRST_ENTRY:
            h.end_phy_offset = self.entry(cut - 1)[1]
            h.end_timestamp = h.begin_timestamp + self._max_time_diff(cut) * 1000
        self.write_header()
        return count - cut

    def _phy_at(self, number: int) -> int:
        return self.entry(number)[1]

    # -- lifecycle ----------------------------------------------------------

    def sync(self) -> None:
        self.store.sync()

    def close(self) -> None:
        self._view.release()
        self.store.close()


class IndexService:
    """All index files of a store, oldest first; the newest takes new entries.

    `build` and `query` run on the store's thread; `flush` may run on the
    flush thread at the same time, so closing files is done under a lock.
    The next file may be made ahead on a thread of its own (see the module
    docstring): making a file, and taking the one made ahead, happen under
    `_making`, so there is never more than one.
    """

    def __init__(
        self,
        directory: Path,
        fs: FileSystem,
        clock: Clock,
        *,
        max_hash_slots: int = 5_000_000,
        max_index_count: int = 20_000_000,
        make_ahead_min_slot_bytes: int = MAKE_AHEAD_MIN_SLOT_BYTES,
        pause: Callable[[], None] = _pause,
    ) -> None:
        if max_hash_slots < 1 or max_index_count < 2:
            raise ValueError("an index file needs at least 1 slot and 2 entries")
        self.directory = directory
        self._fs = fs
        self._clock = clock
        self._slots = max_hash_slots
        self._capacity = max_index_count
        self._file_size = file_size(max_hash_slots, max_index_count)
        self._files: list[IndexFile] = []
        self._spare: IndexFile | None = None
        """The next file, made ahead: by `reserve` for a batch that will need
        it, or, for large files, before it is needed (`make_ahead`)."""
        self._last_indexed = -1
        """Commitlog offset of the newest indexed message, -1 when none."""
        self._lock = threading.Lock()
        self._making = threading.Lock()
        """Held while a file is made and while the spare is taken."""
        self._ahead = max_hash_slots * SLOT_SIZE >= make_ahead_min_slot_bytes
        """Whether files are made ahead (large slot regions only)."""
        self._ahead_below = max(1, max_index_count // MAKE_AHEAD_FREE_FRACTION)
        """Free entries in the newest file below which the next one is made."""
        self._pause = pause
        self._maker: threading.Thread | None = None
        self._maker_failed = False
        """Making ahead failed (no space, say): not tried again until the next file."""
        self._closed = False

    # -- loading ------------------------------------------------------------

    def load(self, clean_shutdown: bool, checkpoint_offset: int) -> int | None:
        """Open existing index files (oldest first); after a crash drop those
        that may hold entries at or past `checkpoint_offset`.

        The checkpoint offset is the exclusive end of what was indexed and
        synced, so a file whose endPhyOffset is >= it holds an entry written
        after the sync. A file with an untrustworthy header is dropped too.
        Once a file is dropped every newer one goes with it, since rebuilding
        continues from the dropped file's begin. Returns the commitlog offset
        to re-dispatch from, or None when nothing was dropped.
        """
        if not self.directory.is_dir():
            return None
        paths = sorted(p for p in self.directory.iterdir() if FILE_NAME.fullmatch(p.name))
        if paths and self._never_written(paths[-1]):
            log.info("removing index file %s, made ahead and never written", paths[-1].name)
            self._fs.remove(paths.pop())
        rebuild_from = self._open_files(paths, clean_shutdown, checkpoint_offset)
        if not clean_shutdown:
            dropped_from = self._repair_newest()
            if dropped_from is not None:
                dropped_from = min(dropped_from, checkpoint_offset)
                rebuild_from = (
                    dropped_from if rebuild_from is None else min(rebuild_from, dropped_from)
                )
        self._last_indexed = self._files[-1].header.end_phy_offset if self._files else -1
        return rebuild_from

    def _open_files(
        self, paths: list[Path], clean_shutdown: bool, checkpoint_offset: int
    ) -> int | None:
        """Open `paths` in order up to the first unusable one, which is removed
        with all that follow; returns where to rebuild from, if anything went."""
        for position, path in enumerate(paths):
            index_file, problem = self._open_existing(path)
            if problem is None and not clean_shutdown:
                problem = self._past_checkpoint(index_file, checkpoint_offset)
            if problem is None and index_file is not None:
                self._files.append(index_file)
                continue
            log.warning("dropping index file %s and newer: %s", path.name, problem)
            rebuild_from = self._rebuild_point(index_file)
            if not clean_shutdown:
                # Entries between the checkpoint and this file's begin may
                # have been lost from the previous file.
                rebuild_from = min(rebuild_from, checkpoint_offset)
            if index_file is not None:
                index_file.close()
            self._remove_paths(paths[position:])
            return rebuild_from
        return None

    def _repair_newest(self) -> int | None:
        """Only the newest file surviving a crash can have been written after
        its header was synced (older ones were complete before it began).

        On a full disk a repair may need blocks the file never had (its slots
        were sparse): then the file is dropped and its begin offset returned,
        to be indexed again once there is room."""
        if not self._files:
            return None
        newest = self._files[-1]
        try:
            repaired = newest.repair_after_crash()
        except NoSpaceError as exc:
            log.warning(
                "no space to repair index file %s (%s): dropping it, its messages are "
                "indexed again later",
                newest.path.name,
                exc.strerror,
            )
            rebuild_from = self._rebuild_point(newest)
            self._drop([newest])
            return rebuild_from
        if repaired:
            log.warning("repaired index file %s after a crash", newest.path.name)
            newest.sync()
        return None

    def _never_written(self, path: Path) -> bool:
        """A file of the right size whose header is all zeros: made ahead and
        left unused (a put writes beginTimestamp before any entry or slot)."""
        if path.stat().st_size != self._file_size:
            return False
        store = self._fs.open_file(path, self._file_size)
        try:
            return not any(store.view(0, HEADER_SIZE))
        finally:
            store.close()

    def _open_existing(self, path: Path) -> tuple[IndexFile | None, str | None]:
        """The file and why it cannot be used (None when it can)."""
        actual = path.stat().st_size
        if actual != self._file_size:
            return None, f"size {actual}, expected {self._file_size}"
        index_file = IndexFile(
            self._fs.open_file(path, self._file_size), self._slots, self._capacity
        )
        index_file.read_header()
        problem = index_file.consistency_problem()
        if problem is None and self._files:
            previous = self._files[-1].header
            if index_file.header.begin_phy_offset <= previous.end_phy_offset:
                problem = "begins before the previous file ends"
        return index_file, problem

    @staticmethod
    def _past_checkpoint(index_file: IndexFile | None, checkpoint_offset: int) -> str | None:
        if index_file is not None and index_file.header.end_phy_offset >= checkpoint_offset:
            return f"endPhyOffset {index_file.header.end_phy_offset} >= checkpoint"
        return None

    def _rebuild_point(self, dropped: IndexFile | None) -> int:
        """Where re-dispatch must start so that nothing in `dropped` is lost.

        A trustworthy header gives its beginPhyOffset. Otherwise the previous
        file's last offset is safe (that message is skipped as already
        indexed), or 0 when there is no previous file.
        """
        if dropped is not None and dropped.consistency_problem() is None:
            return dropped.header.begin_phy_offset
        return self._files[-1].header.end_phy_offset if self._files else 0

    def _remove_paths(self, paths: Iterable[Path]) -> None:
        for path in paths:
            self._fs.remove(path)

    # -- building -----------------------------------------------------------

    def build(self, request: DispatchRequest) -> None:
        """Index the message under its unique key and each of its keys."""
        phy_offset = request.commitlog_offset
        if phy_offset <= self._last_indexed:
            return
        if request.sys_flag & sysflag.TRANSACTION_MASK in SKIPPED_TRANSACTION_TYPES:
            return
        hashes = self._key_hashes(request)
        if not hashes:
            return
        index_file = self._file_with_room(len(hashes))
        store_timestamp = request.store_timestamp
        for key_hash in hashes:
            if index_file.header.index_count >= self._capacity:
                index_file.write_header()
                index_file = self._new_file()
            index_file.put(key_hash, phy_offset, store_timestamp)
        index_file.write_header()
        self._last_indexed = phy_offset

    def build_packed(self, entries: bytes, store_timestamp: int) -> None:
        """Index a batch from its packed entries (`tidemq.record.batch_append`:
        12 bytes each, int64 physical offset then int32 key hash, a message's
        entries adjacent): the same entries `build` would write per message."""
        if not entries:
            return
        newest = self._files[-1] if self._files else None
        first_offset, _ = PACKED_ENTRY.unpack_from(entries, 0)
        if (
            newest is not None
            and newest.free >= len(entries) // PACKED_ENTRY.size
            and first_offset > self._last_indexed
        ):  # the common case: the whole batch in the newest file
            newest.put_run(entries, store_timestamp)
            newest.write_header()
            self._last_indexed = PACKED_ENTRY.unpack_from(entries, len(entries) - 12)[0]
            return
        items = list(PACKED_ENTRY.iter_unpack(entries))
        touched: list[IndexFile] = []
        count = len(items)
        first = 0
        while first < count:
            phy_offset = items[first][0]
            end = first + 1
            while end < count and items[end][0] == phy_offset:
                end += 1
            if phy_offset > self._last_indexed:
                index_file = self._file_with_room(end - first)
                for _, key_hash in items[first:end]:
                    if index_file.header.index_count >= self._capacity:
                        index_file.write_header()
                        index_file = self._new_file()
                    index_file.put(key_hash, phy_offset, store_timestamp)
                if not touched or touched[-1] is not index_file:
                    touched.append(index_file)
                self._last_indexed = phy_offset
            first = end
        for index_file in touched:
            index_file.write_header()

    def _key_hashes(self, request: DispatchRequest) -> list[int]:
        """Hashes of topic#key for the unique key and each key, without repeats
        (two keys with one hash share an entry: the caller verifies anyway)."""
        topic = request.topic
        hashes: list[int] = []
        if request.unique_key:
            hashes.append(unique_key_hash(topic, request.unique_key))
        if request.keys:
            for key in request.keys.split(KEY_SEPARATOR):
                if key:
                    key_hash = index_key_hash(topic, key)
                    if key_hash not in hashes:
                        hashes.append(key_hash)
        return hashes

    def reserve(self, entries: int) -> None:
        """Room for `entries` more entries (an upper bound for a batch) before
        the batch is written: in the newest file, and in the next one, made
        now, for what will not fit (NoSpaceError when the disk is full)."""
        if entries <= 0:
            return
        newest = self._files[-1] if self._files else None
        if newest is not None:
            free = newest.capacity - newest.header.index_count
            if free >= entries:
                newest.reserve(entries)  # the common case
                if free - entries < self._ahead_below and self._ahead and self._spare is None:
                    self._start_maker()
                return
        if newest is not None and newest.free > 0:
            newest.reserve(min(entries, newest.free))
            if newest.free >= entries:
                return
        with self._making:
            if self._spare is None:
                self._spare = self._create_file()
            spare = self._spare
        spare.reserve(min(entries, self._capacity))

    def make_ahead(self) -> None:
        """Make the next file now, on this thread, when files are made ahead
        and it will be needed soon (there is none yet, or the newest is nearly
        full): at open, so that no message waits for it. A failure (no space)
        is logged; the file is then made when needed."""
        if self._ahead and self._spare is None:
            newest = self._files[-1] if self._files else None
            if newest is None or newest.free < self._ahead_below:
                self._make_spare(paced=False)

    def _start_maker(self) -> None:
        """Make the next file on a thread of its own (see the module docstring)."""
        maker = self._maker
        if self._maker_failed or self._closed or (maker is not None and maker.is_alive()):
            return
        maker = threading.Thread(
            target=self._make_spare, args=(True,), name="tidemq-index-ahead", daemon=True
        )
        self._maker = maker
        maker.start()

    def _make_spare(self, paced: bool) -> None:
        with self._making:
            if self._spare is not None or self._closed:
                return
            try:
                self._spare = self._create_file(paced=paced)
            except OSError as exc:  # a full disk, say: the store's own attempt reports it
                self._maker_failed = True
                log.warning(
                    "could not make the next index file ahead (%s); it is made when needed",
                    exc,
                )
            except Exception:  # a speed-up only: never the end of the store or its thread
                self._maker_failed = True
                log.exception("making the next index file ahead failed; it is made when needed")

    def _file_with_room(self, needed: int) -> IndexFile:
        """The newest file, or a new one when the message's keys do not fit,
        so that a message's entries share one file (and one rebuild point)."""
        if self._files:
            newest = self._files[-1]
            if newest.free >= needed or (newest.is_empty and newest.free > 0):
                return newest
        return self._new_file()

    def _new_file(self) -> IndexFile:
        with self._making:
            index_file, self._spare = self._spare, None
            if index_file is None:
                index_file = self._create_file()
        self._maker_failed = False
        self._files.append(index_file)
        return index_file

    def _create_file(self, *, paced: bool = False) -> IndexFile:
        """A new file with blocks for its header, slots and first entries
        (NoSpaceError, and no file, when the disk is full). `paced`: its slots
        are mapped a slice at a time with a pause after each (made by the
        thread that makes files ahead while the store takes writes)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / self._next_file_name()
        index_file = IndexFile(
            self._fs.open_file(path, self._file_size), self._slots, self._capacity
        )
        try:
            index_file.reserve(1)
        except NoSpaceError:
            index_file.close()
            self._fs.remove(path)
            raise
        index_file.needs_dir_sync = True
        # Slots are written at random: map them now rather than fault per page.
        slots_end = HEADER_SIZE + self._slots * SLOT_SIZE
        if not paced:
            index_file.store.prefault(HEADER_SIZE, slots_end - HEADER_SIZE)
            return index_file
        for start in range(0, slots_end, PREFAULT_SLICE_BYTES):
            index_file.store.prefault(start, min(PREFAULT_SLICE_BYTES, slots_end - start))
            self._pause()
        return index_file

    def _next_file_name(self) -> str:
        """The creation time, moved past the newest file's name if the clock
        has not advanced, so that names sort in creation order."""
        name = file_name_for(self._clock.now_ms())
        newest = self._spare or (self._files[-1] if self._files else None)
        if newest is not None and name <= newest.path.name:
            name = f"{int(newest.path.name) + 1:017d}"
        while (self.directory / name).exists():
            name = f"{int(name) + 1:017d}"
        return name

    # -- querying -----------------------------------------------------------

    def query(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        below_offset: int | None = None,
    ) -> list[int]:
        """Offsets indexed under topic#key's hash with store time in
        [begin_ms, end_ms] (and below `below_offset`, a paging cursor), newest
        first; the caller verifies each record."""
        found: list[int] = []
        if max_num <= 0 or begin_ms > end_ms:
            return found
        key_hash = index_key_hash(topic, key)
        seen: set[int] = set()
        for index_file in reversed(self._files):
            if len(found) >= max_num:
                break
            if index_file.overlaps(begin_ms, end_ms):
                index_file.collect(key_hash, begin_ms, end_ms, max_num, found, seen, below_offset)
        return found

    @property
    def last_update_timestamp(self) -> int:
        return self._files[-1].header.end_timestamp if self._files else 0

    @property
    def last_update_phy_offset(self) -> int:
        return self._files[-1].header.end_phy_offset if self._files else 0

    def files(self) -> list[Path]:
        return [index_file.path for index_file in self._files]

    # -- durability and retention -------------------------------------------

    def flush(self) -> None:
        """Sync every file written since its last sync.

        The flag is cleared before syncing: a put racing with the sync sets it
        again and is synced next time. A sync that fails sets it again too, so
        the flush thread's retry (flush.py) redoes it instead of skipping it.
        """
        with self._lock:
            for index_file in list(self._files):
                if index_file.needs_dir_sync:
                    index_file.needs_dir_sync = False
                    try:
                        self._fs.sync_dir(self.directory)
                    except BaseException:
                        index_file.needs_dir_sync = True
                        raise
                if index_file.unsynced:
                    index_file.unsynced = False
                    try:
                        index_file.sync()
                    except BaseException:
                        index_file.unsynced = True
                        raise

    def delete_files_before(self, min_phy_offset: int) -> list[Path]:
        """Remove the oldest files whose entries all point below
        `min_phy_offset`; the newest file always stays."""
        doomed: list[IndexFile] = []
        for index_file in self._files[:-1]:
            if index_file.header.end_phy_offset >= min_phy_offset:
                break
            doomed.append(index_file)
        return self._drop(doomed)

    def truncate_after(self, phy_offset: int) -> list[Path]:
        """Forget entries at or past `phy_offset` (the commitlog was cut there).

        Files that begin there or later are removed and returned; the newest
        remaining file loses its entries past the cut, so that messages
        written again at those offsets are indexed.
        """
        doomed = [f for f in self._files if f.header.begin_phy_offset >= phy_offset]
        removed = self._drop(doomed)
        if self._files and self._files[-1].header.end_phy_offset >= phy_offset:
            dropped = self._files[-1].truncate_entries_from(phy_offset)
            log.info("dropped %d index entries at or past %d", dropped, phy_offset)
        if self._files and self._files[-1].is_empty:
            removed += self._drop([self._files[-1]])
        self._last_indexed = self._files[-1].header.end_phy_offset if self._files else -1
        return removed

    def _drop(self, doomed: list[IndexFile]) -> list[Path]:
        if not doomed:
            return []
        with self._lock:
            gone = {id(f) for f in doomed}
            self._files = [f for f in self._files if id(f) not in gone]
            for index_file in doomed:
                index_file.close()
                self._fs.remove(index_file.path)
        return [index_file.path for index_file in doomed]

    def close(self) -> None:
        self._closed = True
        maker = self._maker
        if maker is not None:
            maker.join()  # a file being made is finished, then removed below
        self.flush()
        spare, self._spare = self._spare, None
        if spare is not None:  # never written: nothing to keep
            spare.close()
            self._fs.remove(spare.path)
        with self._lock:
            for index_file in self._files:
                index_file.close()
            self._files = []
