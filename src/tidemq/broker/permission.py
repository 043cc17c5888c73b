"""brokerPermission: what the whole broker allows, above each topic's permission.

RocketMQ operators take a broker out of service with `mqadmin updateBrokerConfig
-k brokerPermission -v 4` (read only): the broker registers every topic with
its permission masked by it, so producers stop choosing it while consumers drain
it, and, with the read bit gone too, pulls and pops are refused (apache/rocketmq
BrokerController.registerBrokerAll, PullMessageProcessor, PopMessageProcessor).
Sends are refused only for ordered topics (AbstractSendMessageProcessor.msgCheck):
a producer with a stale route still gets its message stored.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemq.broker.requests import BrokerError
from tidemq.broker.topics import PERM_INHERIT, PERM_READ, PERM_WRITE
from tidemq.protocol.codes import ResponseCode

__all__ = ["ALL_PERMISSIONS", "BrokerPermission", "parse_permission"]

ALL_PERMISSIONS = PERM_READ | PERM_WRITE
"""BrokerConfig.brokerPermission's default."""


def parse_permission(text: object) -> int:
    """A brokerPermission value (0..7, as PermName bits); ValueError otherwise."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"brokerPermission must be a number 0..7, not {text!r}") from None
    if not 0 <= value <= (PERM_READ | PERM_WRITE | PERM_INHERIT):
        raise ValueError(f"brokerPermission must be 0..7 (4 read, 2 write), not {value}")
    return value


class BrokerPermission:
    """The broker's permission now; `set` changes it (UPDATE_BROKER_CONFIG)."""

    def __init__(
        self, value: int, broker_ip: str, on_change: Callable[[], None] | None = None
    ) -> None:
        self.value = parse_permission(value)
        self.broker_ip = broker_ip
        self.on_change = on_change
        """Called after a change (the broker registers again at once)."""

    @property
    def readable(self) -> bool:
        return self.value & PERM_READ != 0

    @property
    def writable(self) -> bool:
        return self.value & PERM_WRITE != 0

    def set(self, value: int) -> None:
        value = parse_permission(value)
        if value == self.value:
            return
        self.value = value
        if self.on_change is not None:
            self.on_change()

    def mask(self, perm: int) -> int:
        """A topic's permission as this broker shows it (routes, registration)."""
        if self.readable and self.writable:
            return perm
        return perm & self.value

    def check_read(self, what: str) -> None:
        """NO_PERMISSION, in Java's words, while reads are off (`what`: "pulling", "pop")."""
        if not self.readable:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker_ip}] {what} message is forbidden",
            )

    def check_ordered_send(self, ordered: bool) -> None:
        """NO_PERMISSION for a send to an ordered topic while writes are off."""
        if ordered and not self.writable:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker_ip}] sending message is forbidden",
            )
