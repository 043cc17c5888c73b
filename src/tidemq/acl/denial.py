"""Why a request was refused, and the remark the client reads: shared by both access models."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Denial", "Reason"]


class Reason(enum.Enum):
    """Why a request was refused: one counter and one log line per value."""

    BAD_REQUEST = "bad_request"
    NO_ACCESS_KEY = "no_access_key"
    UNKNOWN_ACCESS_KEY = "unknown_access_key"
    BAD_SIGNATURE = "bad_signature"
    NOT_ADMIN = "not_admin"
    NO_PERMISSION = "no_permission"
    BAD_AUTHORIZATION = "bad_authorization"
    """gRPC: an ``authorization`` or ``x-mq-date-time`` header that cannot be read."""
    CLOCK_SKEW = "clock_skew"
    """gRPC: a signed date outside the allowed clock skew."""
    USER_DISABLED = "user_disabled"
    """A RocketMQ 5 user whose status is disable."""

    @property
    def authentication(self) -> bool:
        """Who the caller is was not established (else: what it asked is not allowed)."""
        return self not in (Reason.NOT_ADMIN, Reason.NO_PERMISSION, Reason.BAD_REQUEST)


@dataclass(frozen=True, slots=True)
class Denial:
    """A refusal: its reason and the remark the client reads."""

    reason: Reason
    remark: str
