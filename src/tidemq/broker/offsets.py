"""Consumer offsets: the next queue offset each group will consume, per queue.

Persisted in `config/consumerOffset.json` (RocketMQ's ConsumerOffsetManager)::

    {"offsetTable": {"<topic>@<group>": {"0": 12, "1": 7}, ...}}

Queue ids are JSON object keys, so they are strings in the file (Java's
fastjson writes them as bare numbers; both are read). Topic and group names
cannot contain "@" (see topics.validate_topic_name), so the key splits
unambiguously.

Negative commits are ignored: ali-ons commits -1 for a queue whose in-memory
offset is 0 or unknown, and Java would then treat the stored -1 as "nothing
committed" anyway. The broker writes the file every 5 s when something
changed, and on shutdown; writes are atomic (temp + fsync + rename).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tidemq.broker.topics import read_json_file
from tidemq.common.atomic_file import write_json_atomically

log = logging.getLogger(__name__)

OFFSETS_FILE = "consumerOffset.json"
TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_offset_key(key: str) -> tuple[str, str] | None:
    topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
    if not sep or not topic or not group:
        return None
    return topic, group


def plan_reset(
    current: Mapping[int, int], targets: Mapping[int, int], force: bool
) -> dict[int, int]:
    """The offsets a reset leaves behind (Java's Broker2Client.resetOffset rule):
    a queue moves to its target when forced or when the target is behind the
    committed offset; otherwise it keeps the committed offset. A queue with no
    committed offset takes its target."""
    result: dict[int, int] = {}
    for queue_id, target in targets.items():
        committed = current.get(queue_id, -1)
        target = max(0, target)
        if force or committed < 0 or target < committed:
            result[queue_id] = target
        else:
            result[queue_id] = committed
    return result


class ConsumerOffsetManager:
    """The offset table. Use from the event loop; `snapshot` + `write` let the
    caller do the file write on another thread."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / OFFSETS_FILE
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False

    # -- lifecycle ------------------------------------------------------------

    def load(self) -> None:
        document = read_json_file(self.path)
        if document is None:
            return
        raw_table = document.get("offsetTable") or {}
        if not isinstance(raw_table, dict):
            raise ValueError(f"{self.path}: offsetTable must be an object")
        for key, queues in raw_table.items():
            if split_offset_key(key) is None or not isinstance(queues, dict):
                log.warning("%s: skipping malformed entry %r", self.path, key)
                continue
            table: dict[int, int] = {}
            for queue_id, offset in queues.items():
                try:
                    qid, value = int(queue_id), int(offset)
                except (TypeError, ValueError):
                    log.warning("%s: skipping %r of %s", self.path, queue_id, key)
                    continue
                if qid >= 0 and value >= 0:
                    table[qid] = value
            if table:
                self._table[key] = table

    def snapshot(self) -> dict[str, Any]:
        """The file's JSON document as of now; clears the dirty flag."""
        self._dirty = False
        return {
            "offsetTable": {
                key: {str(q): o for q, o in sorted(queues.items())}
                for key, queues in sorted(self._table.items())
            }
        }

    @property
    def dirty(self) -> bool:
        return self._dirty

    def mark_dirty(self) -> None:
        """A snapshot's write failed: write the table again next time."""
        self._dirty = True

    def write(self, document: Mapping[str, Any]) -> None:
        """Write a snapshot to the file (safe to call on a worker thread)."""
        write_json_atomically(self.path, document)

    def persist(self) -> None:
        self.write(self.snapshot())

    # -- offsets ----------------------------------------------------------------

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Store the next offset to consume; negative offsets and queue ids are ignored."""
        if offset < 0 or queue_id < 0:
            return False
        queues = self._table.setdefault(offset_key(topic, group), {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True
        return True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when there is none."""
        queues = self._table.get(offset_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get(offset_key(topic, group), {}))

    def assign(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Set offsets as given (a reset may move them back); negatives ignored."""
        for queue_id, offset in offsets.items():
            self.commit(group, topic, queue_id, offset)

    def topics_of_group(self, group: str) -> set[str]:
        found = set()
        for key in self._table:
            parts = split_offset_key(key)
            if parts is not None and parts[1] == group:
                found.add(parts[0])
        return found

    def groups_of_topic(self, topic: str) -> set[str]:
        found = set()
        for key in self._table:
            parts = split_offset_key(key)
            if parts is not None and parts[0] == topic:
                found.add(parts[1])
        return found

    def remove_group(self, group: str) -> None:
        for key in [k for k in self._table if (split_offset_key(k) or ("", ""))[1] == group]:
            del self._table[key]
            self._dirty = True

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self._table if (split_offset_key(k) or ("", ""))[0] == topic]:
            del self._table[key]
            self._dirty = True

    def adopt(self, table: Mapping[str, Mapping[int, int]]) -> None:
        """A slave takes its master's offsets: each topic@group of `table`
        replaces its own (SlaveSynchronize.syncConsumerOffset's putAll)."""
        for key, queues in table.items():
            if split_offset_key(key) is None:
                continue
            kept = {q: o for q, o in queues.items() if q >= 0 and o >= 0}
            if self._table.get(key) != kept:
                self._table[key] = kept
                self._dirty = True

    def all_offsets(self) -> dict[str, dict[int, int]]:
        return {key: dict(queues) for key, queues in self._table.items()}
