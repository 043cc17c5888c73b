"""Pure decisions of the server's periodic sweep: which connections to close, when to log.

Idle connections (RocketMQ ``NettyServerConfig.serverChannelMaxIdleTimeSeconds``
= 120 s): Java puts ``IdleStateHandler(0, 0, 120)`` in every server channel's
pipeline and closes the channel on ``ALL_IDLE``, that is when neither a read
nor a write happened for 120 s (``NettyRemotingServer.NettyConnectManageHandler
.userEventTriggered``). tidemq counts traffic the same way, either direction,
observed once per sweep, and closes a connection quiet for ``max_idle_s``.
Clients keep their connections busy: heartbeats and route refreshes every
30 s, and a long-polling pull is held at most 15 s (push consumer) or 20 s
(pull consumers) before its answer, well under 120 s. One difference: a
connection whose request is still being handled is never idle here (Java
closes it anyway and the answer is lost).

Frames: an incomplete frame older than ``frame_timeout_s`` (counted from its
first byte, or from when the frame budget let it read) closes its connection
(a slowloris peer); so does waiting longer than that for the budget.
"""

from __future__ import annotations

import enum


class Verdict(enum.Enum):
    IDLE = "no traffic either way"
    FRAME_TOO_SLOW = "a frame did not complete in time"
    NO_BUDGET = "a frame waited too long for the frame buffer budget"


def verdict(
    *,
    quiet_s: float,
    busy: bool,
    frame_age_s: float | None,
    waited_s: float | None,
    max_idle_s: float | None,
    frame_timeout_s: float,
) -> Verdict | None:
    """Why a connection should be closed now, or None to keep it.

    `quiet_s`: seconds without traffic; `busy`: a request of it is being
    handled; `frame_age_s`: age of its incomplete frame (None: none);
    `waited_s`: how long it has been paused for budget (None: it reads).
    `max_idle_s` None or 0 disables the idle check.
    """
    if waited_s is not None:
        # Paused by the server: its silence is not its own doing.
        return Verdict.NO_BUDGET if waited_s > frame_timeout_s else None
    if frame_age_s is not None and frame_age_s > frame_timeout_s:
        return Verdict.FRAME_TOO_SLOW
    if max_idle_s and not busy and quiet_s >= max_idle_s:
        return Verdict.IDLE
    return None


class LogThrottle:
    """Says when a log line may be written: the first time, then at most once per interval."""

    __slots__ = ("_interval_s", "_last")

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._last: float | None = None

    def due(self, now: float) -> bool:
        """True (and the line counts as written at `now`) when a line is allowed now."""
        if self._last is not None and now - self._last < self._interval_s:
            return False
        self._last = now
        return True
