"""Page through a broker's key index until `max_num` messages are found.

A broker answers QUERY_MESSAGE with a page of records, newest first: Java
caps a key query at maxMsgsNumBatch (64, IndexService.queryOffset), and
Java's `mqadmin queryMsgByKey` shows that one page and says nothing of the
rest. Here the next page is asked for in one of two ways:

* a tidemq broker takes a cursor (the `tidemqBelowOffset` field: only
  records before this commit-log offset) and echoes it; the next page starts
  below the oldest record of the last one, so every match is reached;
* a broker that ignores it (Java's) gets the end of the time range moved to
  the oldest record of the last page. The index keeps store times to the
  second (IndexFile's timeDiff), so pages overlap; repeated records are
  recognised by store host and commit-log offset. A page with nothing new
  moves the end a whole second lower; when that page was full (at least
  Java's defaultQueryMaxNum, 32, records), more records shared that second
  than a page holds, some were skipped, and the result says `incomplete`.

The search stops at an empty page, or once one more message than asked for
has matched (so that a cut result is known to be cut).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from tidemq.common.message import MessageExt

__all__ = [
    "INDEX_RESOLUTION_MS",
    "NO_CURSOR",
    "PAGE_SIZE",
    "KeyQueryResult",
    "Page",
    "merge",
    "search_pages",
]

INDEX_RESOLUTION_MS = 1000
"""An index entry stores its time in seconds from the index file's start."""
PAGE_SIZE = 64
"""Records asked for per page: Java's maxMsgsNumBatch, the most a broker returns."""
SMALLEST_DEFAULT_CAP = 32
"""Java's defaultQueryMaxNum: a page this long may have been cut by the broker."""
NO_CURSOR = 2**63 - 1
"""The cursor of the first page: below every offset (it tells whether the broker pages)."""

Page = Callable[[int, int], Awaitable[tuple[list[MessageExt], bool]]]
"""One QUERY_MESSAGE for PAGE_SIZE records stored at or before the time (ms)
and before the commit-log offset: the records ([] for none), and whether the
broker applied the offset."""


@dataclass(frozen=True, slots=True)
class KeyQueryResult:
    messages: list[MessageExt]
    """The newest `max_num` matches, oldest first."""
    cut: bool
    """More messages match than `max_num`: the oldest were left out."""
    incomplete: bool = False
    """More matches than one page holds share an index second: some may be missing."""


async def search_pages(
    page: Page,
    wanted: Callable[[MessageExt], bool],
    max_num: int,
    end_ms: int,
    begin_ms: int = 0,
) -> KeyQueryResult:
    """Matches from one broker, newest first, until `max_num` + 1 or the index ends."""
    seen: set[tuple[str, int]] = set()
    matched: list[MessageExt] = []
    incomplete = False
    end, below = end_ms, NO_CURSOR
    while end >= begin_ms and len(matched) <= max_num:
        records, paged = await page(end, below)
        if not records:
            break
        fresh = [m for m in records if (m.store_host, m.commit_log_offset) not in seen]
        seen.update((m.store_host, m.commit_log_offset) for m in fresh)
        matched.extend(m for m in fresh if wanted(m))
        if paged:
            lowest = min(m.commit_log_offset for m in records)
            if lowest >= below:  # not really below the cursor: stop rather than loop
                break
            below = lowest
            continue
        oldest = min(m.store_timestamp for m in records)
        if fresh:
            end = min(end, oldest)  # that second may hold more than this page showed
        else:
            incomplete = incomplete or len(records) >= SMALLEST_DEFAULT_CAP
            end = min(end, oldest) - INDEX_RESOLUTION_MS
    return _newest(matched, max_num, cut=False, incomplete=incomplete)


def merge(results: Iterable[KeyQueryResult], max_num: int) -> KeyQueryResult:
    """One result from the results of several brokers."""
    results = list(results)
    return _newest(
        [m for r in results for m in r.messages],
        max_num,
        cut=any(r.cut for r in results),
        incomplete=any(r.incomplete for r in results),
    )


def _newest(
    matched: list[MessageExt], max_num: int, *, cut: bool, incomplete: bool
) -> KeyQueryResult:
    newest = sorted(matched, key=lambda m: (m.store_timestamp, m.msg_id), reverse=True)
    kept = newest[:max_num]
    kept.reverse()
    return KeyQueryResult(kept, cut=cut or len(newest) > max_num, incomplete=incomplete)
