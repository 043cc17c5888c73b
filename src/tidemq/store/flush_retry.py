"""Which flush failures the flush thread may retry, and how long it waits between tries.

A failed fsync is not a failed ``open``. After fdatasync reports an error the
kernel may already have marked the dirty pages clean (PostgreSQL's
"fsyncgate", 2018): a second fdatasync then succeeds without the data being
on disk. So an error that may come out of syncing the commitlog (EIO,
ENOSPC, EDQUOT, EROFS, anything unknown) is permanent: acknowledging a sync
send after it could acknowledge a message that is lost. Java marks the
mapped file not writeable for the same reason (DefaultMappedFile.flush).

Running out of a resource is different: EMFILE, ENFILE, ENOMEM, ENOBUFS,
EAGAIN and EINTR come from acquiring something (a descriptor for
``checkpoint.tmp`` or a directory, a mapping, memory) before anything was
written, never from fsync reporting lost pages; the same step done again
later is correct. Those are retried, in both parts.

ENOSPC and EDQUOT are retried in the derived part only (consumequeues, index,
checkpoint). There they come from writing ``checkpoint.tmp`` (mmap writes get
their blocks at page fault, where a full disk is a SIGBUS, not an errno):
the temporary file is written whole again on the next try and renamed only
after its fsync succeeded, so the old checkpoint stays valid meanwhile, and
everything derived can be rebuilt from the commitlog anyway. A full disk is
also the failure an operator fixes while the broker runs (retention deletes
old files). In the commitlog part they stay permanent, as above.
"""

from __future__ import annotations

import enum
import errno

from tidemq.common.backoff import doubling_delay

FIRST_RETRY_DELAY_S = 0.01
MAX_RETRY_DELAY_S = 1.0

RESOURCE_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN, errno.EINTR}
)
"""Nothing was written: the same step can simply be done again later."""

SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Retryable where the failed write is redone whole (the derived part only)."""


class FlushPart(enum.Enum):
    COMMITLOG = "commitlog"
    DERIVED = "consumequeue/index/checkpoint"


def is_transient(error: BaseException, part: FlushPart) -> bool:
    """True when flushing `part` may be tried again after `error` without risking data."""
    if isinstance(error, MemoryError):
        return True  # Python's ENOMEM: raised before the step it interrupted did anything
    if not isinstance(error, OSError) or error.errno is None:
        return False
    if error.errno in RESOURCE_ERRNOS:
        return True
    return part is FlushPart.DERIVED and error.errno in SPACE_ERRNOS


def next_retry_delay(
    previous: float | None,
    *,
    first: float = FIRST_RETRY_DELAY_S,
    maximum: float = MAX_RETRY_DELAY_S,
) -> float:
    """The pause before the next try: `first`, then doubling, never above `maximum`."""
    return doubling_delay(previous, first=first, maximum=maximum)


def describe(error: BaseException) -> str:
    """`error` as one log-friendly phrase, with the errno's name when it has one."""
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        return f"{name}: {error.strerror or error}"
    return f"{type(error).__name__}: {error}"
