"""Broker roles and the HA stream's settings, with RocketMQ's names and defaults.

Defaults from MessageStoreConfig (apache/rocketmq, 4.9.8 and 5.x alike):
haSendHeartbeatInterval 5 s, haHousekeepingInterval 20 s,
haTransferBatchSize 32 KiB, slaveTimeout 3 s (how long a SYNC_MASTER waits
for a slave's acknowledgement), haSlaveFallbehindMax / haMaxGapNotInSync
256 MiB (a slave further behind is not waited for), brokerRole ASYNC_MASTER.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["BrokerRole", "HaSettings"]


class BrokerRole(enum.Enum):
    """RocketMQ's BrokerRole (store/config/BrokerRole.java)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    """Answers a send once stored (and flushed, in sync-flush mode); slaves copy later."""
    SYNC_MASTER = "SYNC_MASTER"
    """Answers a send once a slave has it as well, or says why not."""
    SLAVE = "SLAVE"
    """Copies its master's commitlog; refuses writes, serves reads."""

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE

    @classmethod
    def parse(cls, text: str) -> BrokerRole:
        """A role from its name, any case; ValueError naming the choices."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            choices = ", ".join(role.value for role in cls)
            raise ValueError(f"unknown broker role {text!r}: one of {choices}") from None


@dataclass(frozen=True, slots=True)
class HaSettings:
    """How the HA stream behaves (both ends)."""

    heartbeat_interval_s: float = 5.0
    """An idle master sends a heartbeat, and a slave its report, this often
    (haSendHeartbeatInterval)."""
    housekeeping_interval_s: float = 20.0
    """A connection silent this long is closed (haHousekeepingInterval)."""
    transfer_batch_size: int = 32 * 1024
    """Bytes of commitlog in one transfer at most (haTransferBatchSize)."""
    slave_timeout_s: float = 3.0
    """How long a SYNC_MASTER waits for a slave to acknowledge a write (slaveTimeout)."""
    max_gap_not_in_sync: int = 256 * 1024 * 1024
    """A SYNC_MASTER whose nearest slave is this many bytes behind answers
    SLAVE_NOT_AVAILABLE at once (haMaxGapNotInSync; haSlaveFallbehindMax in 4.x)."""
    connect_timeout_s: float = 3.0
    """A slave's connection attempt to its master gives up after this."""
    reconnect_max_s: float = 5.0
    """A slave retries its master after a failure, waiting from 0.2 s doubling
    up to this (RocketMQ's HAClient waits 5 s after every failure)."""

    def __post_init__(self) -> None:
        if self.heartbeat_interval_s <= 0 or self.housekeeping_interval_s <= 0:
            raise ValueError("the HA heartbeat and housekeeping intervals must be > 0")
        if self.housekeeping_interval_s <= self.heartbeat_interval_s:
            raise ValueError(
                "the HA housekeeping interval must be longer than the heartbeat interval "
                f"({self.housekeeping_interval_s} s <= {self.heartbeat_interval_s} s): "
                "a live idle connection would be closed"
            )
        if not 1 <= self.transfer_batch_size <= 4 * 1024 * 1024:
            raise ValueError("the HA transfer batch size must be 1 byte .. 4 MiB")
        if self.slave_timeout_s <= 0 or self.max_gap_not_in_sync <= 0:
            raise ValueError("the slave timeout and the max gap not in sync must be > 0")
