"""What a push consumer's user writes: listeners, their statuses and contexts,
the message model, and consume hooks.

A listener is a plain function or an ``async def``:

* a plain function runs in the consumer's thread pool
  (``consume_thread_count`` threads, 20 by default), so it may block;
* an ``async def`` runs on the consumer's event loop, at most
  ``consume_thread_count`` calls at once; it must not block the loop.

Concurrent listeners get ``(messages, ConsumeConcurrentlyContext)`` and return
a :class:`ConsumeStatus`; orderly listeners get ``(messages,
ConsumeOrderlyContext)`` and return a :class:`ConsumeOrderlyStatus`. As in
RocketMQ, a listener that raises or returns None has failed
(RECONSUME_LATER / SUSPEND_CURRENT_QUEUE_A_MOMENT).
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from tidemq.common.message import MessageExt, MessageQueue

__all__ = [
    "ACK_INDEX_ALL",
    "CONSUME_CONTEXT_TYPE",
    "AsyncConcurrentListener",
    "AsyncOrderlyListener",
    "ConcurrentListener",
    "ConsumeConcurrentlyContext",
    "ConsumeHook",
    "ConsumeHookContext",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "MessageModel",
    "OrderlyListener",
    "SyncConcurrentListener",
    "SyncOrderlyListener",
    "concurrent_status",
    "consume_return_type",
    "is_async_listener",
    "orderly_status",
]

log = logging.getLogger(__name__)

ACK_INDEX_ALL = 2**31 - 1
"""Java's default ``ackIndex`` (Integer.MAX_VALUE): every message of a
successful batch is acknowledged."""


class MessageModel(enum.Enum):
    """CLUSTERING: the group shares the queues; BROADCASTING: every consumer gets all."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeStatus(enum.Enum):
    """What a concurrent listener returns (Java ``ConsumeConcurrentlyStatus``)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns (Java ``ConsumeOrderlyStatus``; the
    deprecated COMMIT/ROLLBACK are not offered)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Handed to a concurrent listener with each batch; the listener may set
    the fields to steer what happens next."""

    mq: MessageQueue
    delay_level_when_next_consume: int = 0
    """Delay level for messages sent back on failure; 0 lets the broker decide
    (3 + reconsume times), -1 sends them straight to the DLQ (Java)."""
    ack_index: int = ACK_INDEX_ALL
    """On CONSUME_SUCCESS, messages after this index are treated as failed
    (clustering: sent back); the default acknowledges the whole batch."""


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Handed to an orderly listener with each batch."""

    mq: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1
    """Pause before a SUSPEND_CURRENT_QUEUE_A_MOMENT retry; -1 = the
    consumer's ``suspend_current_queue_time_ms``."""


SyncConcurrentListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], "ConsumeStatus | None"
]
AsyncConcurrentListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], Awaitable["ConsumeStatus | None"]
]
ConcurrentListener: TypeAlias = SyncConcurrentListener | AsyncConcurrentListener

SyncOrderlyListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeOrderlyContext], "ConsumeOrderlyStatus | None"
]
AsyncOrderlyListener: TypeAlias = Callable[
    [list[MessageExt], ConsumeOrderlyContext], Awaitable["ConsumeOrderlyStatus | None"]
]
OrderlyListener: TypeAlias = SyncOrderlyListener | AsyncOrderlyListener


def is_async_listener(listener: Callable[..., Any]) -> bool:
    """True for an ``async def`` (or an object whose ``__call__`` is one)."""
    if inspect.iscoroutinefunction(listener):
        return True
    call = getattr(listener, "__call__", None)  # noqa: B004 - a callable object
    return call is not None and inspect.iscoroutinefunction(call)


def concurrent_status(result: object) -> ConsumeStatus:
    """A concurrent listener's return value as a status: None (and anything
    that is not a ConsumeStatus) counts as RECONSUME_LATER, as Java does."""
    if isinstance(result, ConsumeStatus):
        return result
    if result is not None:
        log.warning("a listener returned %r, not a ConsumeStatus: RECONSUME_LATER", result)
    return ConsumeStatus.RECONSUME_LATER


def orderly_status(result: object) -> ConsumeOrderlyStatus:
    """An orderly listener's return value as a status: None (and anything that
    is not a ConsumeOrderlyStatus) counts as SUSPEND_CURRENT_QUEUE_A_MOMENT."""
    if isinstance(result, ConsumeOrderlyStatus):
        return result
    if result is not None:
        log.warning(
            "an orderly listener returned %r, not a ConsumeOrderlyStatus: "
            "SUSPEND_CURRENT_QUEUE_A_MOMENT",
            result,
        )
    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


# -- hooks ------------------------------------------------------------------------

CONSUME_CONTEXT_TYPE = "ConsumeContextType"
"""MixAll.CONSUME_CONTEXT_TYPE: the key of a ConsumeHookContext property the
consume services set for the after-hook to the call's ConsumeReturnType name:
SUCCESS, TIME_OUT, EXCEPTION, RETURNNULL or FAILED (message traces record it)."""


def consume_return_type(result: object, raised: bool, elapsed_ms: int, timeout_ms: int) -> str:
    """The ConsumeReturnType name of one listener call, as Java's consume
    services decide it: no status (an exception, None or something that is
    not a status) -> EXCEPTION / RETURNNULL; a call as long as the consume
    timeout -> TIME_OUT even if it succeeded; a retry status -> FAILED."""
    if raised:
        return "EXCEPTION"
    if not isinstance(result, ConsumeStatus | ConsumeOrderlyStatus):
        return "RETURNNULL"
    if elapsed_ms >= timeout_ms:
        return "TIME_OUT"
    if result in (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
        return "SUCCESS"
    return "FAILED"


@dataclass(slots=True)
class ConsumeHookContext:
    """What a consume hook sees around one listener call (Java ``ConsumeMessageContext``)."""

    group: str
    mq: MessageQueue
    messages: Sequence[MessageExt]
    orderly: bool
    status: str | None = None
    """Set for the after-hook: the status name, or "EXCEPTION" when the listener raised."""
    success: bool = False
    """Set for the after-hook."""
    properties: dict[str, str] = field(default_factory=dict)
    """Free for hooks to pass values from before to after; for the after-hook
    the consume service adds CONSUME_CONTEXT_TYPE (as Java does)."""
    started_ms: int = 0
    """When the listener call started (set after the before-hooks)."""


class ConsumeHook(Protocol):
    """Called just before and after each listener call: in the pool thread for a
    concurrent plain-function listener (where Java calls them), on the event
    loop otherwise, so a hook must be thread-safe. A hook that raises is logged
    and otherwise ignored."""

    def consume_message_before(self, context: ConsumeHookContext) -> None: ...

    def consume_message_after(self, context: ConsumeHookContext) -> None: ...
