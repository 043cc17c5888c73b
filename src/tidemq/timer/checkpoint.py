"""The timer store's checkpoint: how far everything is durable and delivered.

`timer/checkpoint.json`, replaced atomically (temporary file, fsync, rename)
and always written AFTER the timer log and the timer files it covers were
fsynced:

- `enqueue_offset`: the next TIMER_TOPIC queue-0 offset to enqueue; every
  entry before it has its timer log record and its unit on disk.
- `watermark_ms` / `watermark_source`: the (eff_ms, source offset) of the
  last delivered entry; every entry at or below it, in that order, was
  delivered (or recalled, or skipped as undeliverable).
- `scan_from`: the commitlog end at a moment no delivery put was in flight;
  deliveries of entries above the watermark all lie at or after it, so
  recovery finds them by their TIMER_SOURCE_OFFSET property.
- `log_end` and `segments` (segment start -> latest eff_ms in it): the timer
  log's durable end and its retirement bookkeeping.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tidemq.common.atomic_file import write_json_atomically

FILE_NAME = "checkpoint.json"
VERSION = 1


class TimerCheckpointError(ValueError):
    """The checkpoint exists but cannot be read."""


@dataclass
class TimerCheckpoint:
    enqueue_offset: int = 0
    watermark_ms: int = -1
    watermark_source: int = -1
    scan_from: int = 0
    log_end: int = 0
    segments: dict[int, int] = field(default_factory=dict)
    version: int = VERSION

    @property
    def watermark(self) -> tuple[int, int]:
        return (self.watermark_ms, self.watermark_source)


def load_checkpoint(directory: Path) -> TimerCheckpoint | None:
    """The checkpoint in `directory`, None when there is none yet."""
    path = directory / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        document = json.loads(text)
        return TimerCheckpoint(
            enqueue_offset=int(document["enqueue_offset"]),
            watermark_ms=int(document["watermark_ms"]),
            watermark_source=int(document["watermark_source"]),
            scan_from=int(document["scan_from"]),
            log_end=int(document["log_end"]),
            segments={int(k): int(v) for k, v in document.get("segments", {}).items()},
            version=int(document.get("version", VERSION)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TimerCheckpointError(f"timer checkpoint {path} is unreadable: {exc}") from None


def save_checkpoint(directory: Path, checkpoint: TimerCheckpoint) -> None:
    document = asdict(checkpoint)
    document["segments"] = {str(k): v for k, v in checkpoint.segments.items()}
    write_json_atomically(directory / FILE_NAME, document)
