"""RocketMQ 5.3's recall handle: what a timer message's send result carries
and RECALL_MESSAGE hands back.

`base64url("v1 <topic> <brokerName> <deliverTimestampMs> <uniqueKey>")`, the
format of Java's `RecallMessageHandle.HandleV1`, so handles from either side
read the same. Pure: encode and decode, with errors a person can read.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

VERSION = "v1"
_SEPARATOR = " "


class RecallHandleError(ValueError):
    """A handle that is not a v1 recall handle."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    deliver_ms: int
    unique_key: str

    def encode(self) -> str:
        for name, value in (
            ("topic", self.topic),
            ("broker name", self.broker_name),
            ("message id", self.unique_key),
        ):
            if not value or _SEPARATOR in value:
                raise RecallHandleError(f"the {name} {value!r} cannot be put in a recall handle")
        raw = _SEPARATOR.join(
            (VERSION, self.topic, self.broker_name, str(self.deliver_ms), self.unique_key)
        )
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii")

    @classmethod
    def decode(cls, handle: str) -> RecallHandle:
        """The handle's fields; RecallHandleError when it is not one."""
        if not handle:
            raise RecallHandleError("recall handle is invalid: it is empty")
        try:
            raw = base64.urlsafe_b64decode(handle.encode("ascii")).decode("utf-8")
        except (binascii.Error, UnicodeError, ValueError):
            raise RecallHandleError("recall handle is invalid: not base64url text") from None
        items = raw.split(_SEPARATOR)
        if len(items) < 5 or items[0] != VERSION:
            raise RecallHandleError("recall handle is invalid: not a v1 handle")
        try:
            deliver_ms = int(items[3])
        except ValueError:
            raise RecallHandleError("recall handle is invalid: bad timestamp") from None
        return cls(items[1], items[2], deliver_ms, items[4])
