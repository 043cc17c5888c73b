"""Where replication starts and what a slave does with each transfer: pure decisions.

Master side (`start_offset`): RocketMQ's master starts from the offset the
slave first reports, or, for a slave that reports 0, from the start of its
last commitlog file (DefaultHAConnection.WriteSocketService). tidemq starts
such a slave from the master's oldest byte instead, so that a new slave holds
every message the master still has and can serve them (and replace it).
A slave reporting more than the master has is answered from the master's end:
the first heartbeat then tells it to truncate. A slave reporting less than
the master's oldest byte is answered from there: it finds the gap and says so.

Slave side (`on_transfer`): RocketMQ's slave appends a transfer when it
starts at its own end (or when its log is empty) and otherwise closes the
connection (DefaultHAClient.dispatchReadRequest). tidemq does the same, and
one thing more: when the master's first transfer of a connection starts
below the slave's end, the master lost what the slave has past it (an unclean
restart of the master, or an older store put back), so the slave truncates
to the master's end and reports what it dropped. It never truncates in the
middle of a connection (a master's offsets only go forward), nor below its
own oldest file.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Append", "Refuse", "StartAt", "Truncate", "on_transfer", "start_offset"]


def start_offset(requested: int, master_min: int, master_max: int) -> int:
    """The commitlog offset the master sends from, for a slave whose first report is `requested`."""
    if requested > master_max:
        return master_max
    if requested < master_min:
        return master_min
    return requested


@dataclass(frozen=True, slots=True)
class Append:
    """The transfer continues the slave's log: append it."""


@dataclass(frozen=True, slots=True)
class StartAt:
    """The slave's log is empty: it begins at `offset`, a file boundary."""

    offset: int


@dataclass(frozen=True, slots=True)
class Truncate:
    """The slave is ahead of its master: cut its log back to `offset`."""

    offset: int
    dropped: int
    """Bytes of commitlog the slave drops."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """The transfer cannot be applied: close the connection, say why."""

    reason: str


Decision = Append | StartAt | Truncate | Refuse


def on_transfer(
    offset: int,
    *,
    slave_min: int,
    slave_end: int,
    slave_empty: bool,
    first: bool,
    file_size: int,
) -> Decision:
    """What a slave whose log holds [slave_min, slave_end) does with a transfer
    starting at `offset` (`first`: the first of its connection)."""
    if offset == slave_end:
        return Append()
    if slave_empty:
        if offset % file_size == 0:
            return StartAt(offset)
        return Refuse(
            f"the master starts at {offset}, inside a commitlog file of {file_size} bytes; "
            "an empty slave can only start at a file boundary"
        )
    if offset > slave_end:
        return Refuse(
            f"the master no longer has this slave's next bytes: it starts at {offset}, "
            f"the slave ends at {slave_end} ({offset - slave_end} bytes missing); "
            "move this slave's store aside to copy the master's from its oldest file"
        )
    if not first:
        return Refuse(
            f"the master sent offset {offset} while the slave expected {slave_end} "
            "in the middle of a connection"
        )
    if offset < slave_min:
        return Refuse(
            f"the master ends at {offset}, below this slave's oldest commitlog byte "
            f"{slave_min}: nothing in common to keep"
        )
    return Truncate(offset, slave_end - offset)
