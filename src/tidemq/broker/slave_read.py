"""Which broker of a master/slave group a consumer should pull from next.

Pure policy, no I/O: the pull processor of a master and of a slave answers
every PULL_MESSAGE with `suggestWhichBrokerId`, and the client pulls its
next batch of that queue from that broker (PullAPIWrapper.updatePullFromWhichNode).

RocketMQ 4.9.7 (the 4.x model tidemq follows):

* DefaultMessageStore.getMessage sets `suggestPullingFromSlave` when the
  commitlog bytes after the last record the pull scanned exceed
  `accessMessageInMemoryMaxRatio` % (default 40) of the machine's physical
  memory (StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE): the consumer is so far
  behind that its reads come from disk, not the page cache.
* PullMessageProcessor.processRequest: with `slaveReadEnable` (BrokerConfig,
  default false) the suggestion is the group's `whichBrokerWhenConsumeSlowly`
  (default 1) when the store suggested a slave, else the group's `brokerId`
  (default 0); without it, always the master (0). The role only decides a
  SLAVE's own answers below; the suggestion rule is the same on both.
* A slave does not correct offsets (MessageStoreConfig.offsetCheckInSlave,
  default false): DefaultMessageStore.nextOffsetCorrection keeps the
  requested offset as the next one, and PullMessageProcessor turns
  PULL_OFFSET_MOVED into PULL_RETRY_IMMEDIATELY with the group's brokerId
  as the suggestion, so a slave that is behind its master never moves a
  consumer's offset.

RocketMQ 5 differs: a SLAVE without slaveReadEnable rejects pulls outright
(PullMessageProcessor.rejectRequest), which stops consumers while the master
is down; tidemq keeps 4.x's rule, where a slave serves the pull and points
back to the master.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tidemq.broker.requests import MASTER_ID
from tidemq.protocol.codes import ResponseCode
from tidemq.store.api import GetStatus

__all__ = [
    "DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO",
    "MASTER_ID",
    "SlavePullAnswer",
    "in_memory_limit",
    "slave_pull_answer",
    "suggest_pulling_from_slave",
    "suggest_which_broker_id",
    "total_physical_memory",
]

DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40
"""MessageStoreConfig.accessMessageInMemoryMaxRatio (percent of physical memory)."""
_FALLBACK_MEMORY = 24 * 1024**3
"""StoreUtil.getTotalPhysicalMemorySize's answer when the OS does not tell."""

_CORRECTED_STATUSES = frozenset(
    {
        GetStatus.NO_MATCHED_LOGIC_QUEUE,
        GetStatus.NO_MESSAGE_IN_QUEUE,
        GetStatus.OFFSET_TOO_SMALL,
        GetStatus.OFFSET_OVERFLOW_ONE,
        GetStatus.OFFSET_OVERFLOW_BADLY,
        GetStatus.OFFSET_FOUND_NULL,
    }
)
"""The read statuses whose next offset DefaultMessageStore.nextOffsetCorrection sets."""


def total_physical_memory() -> int:
    """The machine's physical memory in bytes (24 GiB when unknown, as Java)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_MEMORY


def in_memory_limit(physical_memory: int, ratio_percent: int) -> int:
    """Bytes of commitlog a consumer may lag and still read from memory."""
    if not 0 <= ratio_percent <= 100:
        raise ValueError(f"access_message_in_memory_max_ratio={ratio_percent}: must be 0..100")
    return physical_memory * ratio_percent // 100


def suggest_pulling_from_slave(
    commitlog_max_offset: int, last_pulled_physical_offset: int, limit_bytes: int
) -> bool:
    """DefaultMessageStore.getMessage: the bytes written after the last record
    pulled are more than memory holds, so the consumer should read a slave."""
    return commitlog_max_offset - last_pulled_physical_offset > limit_bytes


def suggest_which_broker_id(
    *,
    slave_read_enable: bool,
    pulling_from_slave: bool,
    group_broker_id: int,
    which_broker_when_consume_slowly: int,
) -> int:
    """PullMessageProcessor's suggestWhichBrokerId (same on master and slave)."""
    if not slave_read_enable:
        return MASTER_ID
    return which_broker_when_consume_slowly if pulling_from_slave else group_broker_id


@dataclass(frozen=True, slots=True)
class SlavePullAnswer:
    """What a slave answers a pull with (code, next offset, suggestion)."""

    code: int
    next_begin_offset: int
    suggest_which_broker_id: int


def slave_pull_answer(
    *,
    status: GetStatus,
    code: int,
    request_offset: int,
    next_begin_offset: int,
    suggestion: int,
    group_broker_id: int,
    offset_check_in_slave: bool = False,
) -> SlavePullAnswer:
    """A SLAVE's answer: it keeps the consumer's offset where it is (the
    slave may simply be behind its master) unless offset_check_in_slave."""
    if offset_check_in_slave:
        return SlavePullAnswer(code, next_begin_offset, suggestion)
    if status in _CORRECTED_STATUSES:
        next_begin_offset = request_offset
    if code == ResponseCode.PULL_OFFSET_MOVED:
        return SlavePullAnswer(
            ResponseCode.PULL_RETRY_IMMEDIATELY, next_begin_offset, group_broker_id
        )
    return SlavePullAnswer(code, next_begin_offset, suggestion)
