"""What retention took away, so that a forced deletion is never silent.

Above the force ratio (RocketMQ's diskSpaceCleanForciblyRatio, 85 %) the
oldest commitlog files are deleted whether or not they expired and whether
or not anyone read them: RocketMQ does the same and logs it at INFO. tidemq
keeps the behaviour but says what was lost: per consumequeue, the queue
offsets [before, after) that can no longer be read, logged at WARNING, and
counted since start for the broker's runtime figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueueLoss:
    """Queue offsets [first, end) of topic/queue_id that retention made unreadable."""

    topic: str
    queue_id: int
    first: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.first

    def describe(self) -> str:
        return f"{self.topic}/{self.queue_id} [{self.first}, {self.end})"


def queue_losses(
    before: dict[tuple[str, int], int], after: dict[tuple[str, int], int]
) -> list[QueueLoss]:
    """The queues whose min offset moved up, from min offsets before and after."""
    losses = []
    for (topic, queue_id), first in sorted(before.items()):
        end = after.get((topic, queue_id), first)
        if end > first:
            losses.append(QueueLoss(topic, queue_id, first, end))
    return losses


@dataclass
class RetentionCounters:
    """Deletions since the store opened."""

    deleted_files: int = 0
    """Commitlog files deleted, expired or forced."""
    forced_files: int = 0
    """Commitlog files deleted before they expired, because the disk was full."""
    forced_messages: int = 0
    """Consumequeue entries those forced deletions made unreadable."""
    last_forced: list[QueueLoss] = field(default_factory=list)
    """The queues the latest forced deletion took messages from."""

    def record(self, files: int, forced: int, losses: list[QueueLoss]) -> None:
        self.deleted_files += files
        if forced:
            self.forced_files += forced
            self.forced_messages += sum(loss.count for loss in losses)
            self.last_forced = losses
