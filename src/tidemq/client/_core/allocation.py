"""Rebalance allocation strategies: which queues of a topic this consumer owns.

Every consumer of a group runs the same strategy on the same inputs (the
topic's queues and the group's consumer ids, both sorted by the caller), so
each computes its own share and, together, the shares cover every queue once.
The strategies reproduce RocketMQ's `AllocateMessageQueue*` classes result for
result, so tidemq consumers can share a group with Java (and ali-ons) ones.

Common contract (RocketMQ's `AbstractAllocateMessageQueueStrategy.check`):
an empty `current_id`, queue list or consumer list is a ValueError; a
`current_id` missing from `consumer_ids` gets an empty share.

Pure functions over values: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Collection, Iterable, Sequence
from typing import Protocol

from tidemq.common.message import MessageQueue

__all__ = [
    "STRATEGIES",
    "AllocateStrategy",
    "Averagely",
    "AveragelyByCircle",
    "ByConfig",
    "ByMachineRoom",
    "ConsistentHash",
    "MachineRoomNearby",
    "MachineRoomResolver",
    "md5_hash",
    "queue_key",
]


class AllocateStrategy(Protocol):
    """One allocation strategy; `name` is RocketMQ's `getName()`."""

    @property
    def name(self) -> str: ...

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        """The queues `current_id` owns; inputs sorted by the caller."""
        ...


def _index_of(current_id: str, queues: Sequence[MessageQueue], consumer_ids: Sequence[str]) -> int:
    """The position of `current_id` in `consumer_ids`, -1 when absent.

    ValueError on empty inputs, as Java's IllegalArgumentException.
    """
    if not current_id:
        raise ValueError("current_id is empty")
    if not queues:
        raise ValueError("queues is empty")
    if not consumer_ids:
        raise ValueError("consumer_ids is empty")
    try:
        return list(consumer_ids).index(current_id)
    except ValueError:
        return -1


class Averagely:
    """AllocateMessageQueueAveragely ("AVG", the default): contiguous pages.

    With n queues and c consumers, the first n % c consumers take
    n // c + 1 queues and the rest n // c, in consumer order (8 queues,
    3 consumers: 3, 3, 2). When n <= c each of the first n consumers takes one
    queue and the others take none.
    """

    name = "AVG"

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        index = _index_of(current_id, queues, consumer_ids)
        if index < 0:
            return []
        n, c = len(queues), len(consumer_ids)
        mod = n % c
        bigger = mod > 0 and index < mod
        if n <= c:
            size = 1
        elif bigger:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if bigger else index * size + mod
        count = min(size, n - start)
        return list(queues[start : start + max(count, 0)])


class AveragelyByCircle:
    """AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE"): round robin.

    Queue i goes to consumer i % c (8 queues, 3 consumers: 0,3,6 / 1,4,7 / 2,5).
    """

    name = "AVG_BY_CIRCLE"

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        index = _index_of(current_id, queues, consumer_ids)
        if index < 0:
            return []
        return list(queues[index :: len(consumer_ids)])


def md5_hash(key: str) -> int:
    """RocketMQ's `ConsistentHashRouter.MD5Hash`: the first 4 bytes of the MD5
    of the UTF-8 key, big-endian, as an unsigned 32-bit value."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def queue_key(mq: MessageQueue) -> str:
    """Java's `MessageQueue.toString()`, the key a queue is hashed by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class ConsistentHash:
    """AllocateMessageQueueConsistentHash ("CONSISTENT_HASH").

    Each consumer puts `virtual_nodes` points on a ring of 2^32 at
    `md5_hash(f"{client_id}-{i}")`; a queue belongs to the consumer of the
    first point at or after `md5_hash(queue_key(mq))`, wrapping around. On a
    hash collision the point added last wins (Java's TreeMap.put), points being
    added consumer by consumer in `consumer_ids` order. Adding or removing a
    consumer moves only the queues next to its points. With 0 virtual nodes the
    ring is empty and nobody gets anything, as in Java.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes: int = 10) -> None:
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual_nodes: {virtual_nodes}")
        self.virtual_nodes = virtual_nodes

    def ring(self, consumer_ids: Iterable[str]) -> tuple[list[int], list[str]]:
        """The ring as sorted point hashes and the owner of each point."""
        points: dict[int, str] = {}
        for client_id in consumer_ids:
            for i in range(self.virtual_nodes):
                points[md5_hash(f"{client_id}-{i}")] = client_id
        hashes = sorted(points)
        return hashes, [points[h] for h in hashes]

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        if _index_of(current_id, queues, consumer_ids) < 0:
            return []
        hashes, owners = self.ring(consumer_ids)
        if not hashes:
            return []
        result = []
        for mq in queues:
            at = bisect_left(hashes, md5_hash(queue_key(mq)))
            if owners[at % len(hashes)] == current_id:
                result.append(mq)
        return result


class ByConfig:
    """AllocateMessageQueueByConfig ("CONFIG"): a fixed list, whatever the inputs.

    As in Java, the inputs are not even checked.
    """

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = list(queues)

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        return list(self.queues)


def _java_split(text: str, sep: str) -> list[str]:
    """`String.split` for a literal one-character separator: trailing empty
    parts are dropped."""
    parts = text.split(sep)
    while parts and not parts[-1]:
        parts.pop()
    return parts


class ByMachineRoom:
    """AllocateMessageQueueByMachineRoom ("MACHINE_ROOM").

    Broker names read `<idc>@<broker>`; only queues on brokers whose idc is in
    `consumer_idcs` are shared (others, and names without exactly one `@`, are
    left to nobody), page by page: each consumer takes `m // c` contiguous
    queues, and the `m % c` left over at the end go one each to the first
    consumers.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Collection[str]) -> None:
        self.consumer_idcs = frozenset(consumer_idcs)

    def eligible(self, queues: Iterable[MessageQueue]) -> list[MessageQueue]:
        """The queues in the consumers' rooms, in input order."""
        result = []
        for mq in queues:
            parts = _java_split(mq.broker_name, "@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                result.append(mq)
        return result

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        index = _index_of(current_id, queues, consumer_ids)
        if index < 0:
            return []
        eligible = self.eligible(queues)
        c = len(consumer_ids)
        per, rest = divmod(len(eligible), c)
        result = eligible[index * per : index * per + per]
        if index < rest:
            result.append(eligible[index + per * c])
        return result


class MachineRoomResolver(Protocol):
    """Where brokers and consumers run (RocketMQ's `MachineRoomResolver`)."""

    def broker_deploy_in(self, mq: MessageQueue) -> str: ...

    def consumer_deploy_in(self, client_id: str) -> str: ...


class MachineRoomNearby:
    """AllocateMachineRoomNearby ("MACHINE_ROOM_NEARBY-<fallback name>").

    Queues are grouped by their broker's room and consumers by theirs. The
    queues of a room are shared by the consumers of that room with `fallback`;
    the queues of a room where no consumer runs are shared by all consumers.
    An empty room name for a queue or a consumer is a ValueError (Java throws).
    The result lists this consumer's own room first, then the orphan rooms in
    name order.
    """

    def __init__(self, resolver: MachineRoomResolver, fallback: AllocateStrategy) -> None:
        self.resolver = resolver
        self.fallback = fallback

    @property
    def name(self) -> str:
        return f"MACHINE_ROOM_NEARBY-{self.fallback.name}"

    def allocate(
        self,
        group: str,
        current_id: str,
        queues: Sequence[MessageQueue],
        consumer_ids: Sequence[str],
    ) -> list[MessageQueue]:
        if _index_of(current_id, queues, consumer_ids) < 0:
            return []
        room_queues: dict[str, list[MessageQueue]] = {}
        for mq in queues:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"machine room is empty for {mq}")
            room_queues.setdefault(room, []).append(mq)
        room_consumers: dict[str, list[str]] = {}
        for client_id in consumer_ids:
            room = self.resolver.consumer_deploy_in(client_id)
            if not room:
                raise ValueError(f"machine room is empty for consumer {client_id}")
            room_consumers.setdefault(room, []).append(client_id)

        result: list[MessageQueue] = []
        my_room = self.resolver.consumer_deploy_in(current_id)
        local = room_queues.pop(my_room, [])
        if local:
            result += self.fallback.allocate(group, current_id, local, room_consumers[my_room])
        for room in sorted(room_queues):
            if room not in room_consumers:
                result += self.fallback.allocate(group, current_id, room_queues[room], consumer_ids)
        return result


STRATEGIES: dict[str, AllocateStrategy] = {
    strategy.name: strategy for strategy in (Averagely(), AveragelyByCircle(), ConsistentHash())
}
"""The strategies that need no configuration, by RocketMQ name ("AVG",
"AVG_BY_CIRCLE", "CONSISTENT_HASH" with 10 virtual nodes). ByConfig,
ByMachineRoom and MachineRoomNearby take arguments: build them directly."""
