"""A slave copies its master's metadata: RocketMQ's SlaveSynchronize.

What and how (apache/rocketmq broker/slave/SlaveSynchronize.java, scheduled by
BrokerController.handleSlaveSynchronize 3 s after start, then every 10 s):

* topic configs (GET_ALL_TOPIC_CONFIG): taken whole when the master's data
  version differs from the slave's;
* consumer offsets (GET_ALL_CONSUMER_OFFSET): each topic@group of the
  master's replaces the slave's (putAll), every time;
* delay offsets (GET_ALL_DELAY_OFFSET): the master's delayOffset.json
  written over the slave's;
* subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): taken whole when
  the data version differs;
* timer progress (GET_TIMER_CHECK_POINT, syncTimerCheckPoint, every 3 s in
  RocketMQ 5): the master's last read time and timer queue offset, kept in
  `config/timerMasterProgress.json` (tidemq.broker.timer_progress).

Nothing of POP is copied because nothing needs to be: RocketMQ copies the
message request modes (GET_ALL_MESSAGE_REQUEST_MODE, syncMessageRequestMode),
which tidemq does not implement, and POP's checkpoints and acks live in the
commitlog (the revive topic), which a slave already has.

Each table is its own step: one that fails is logged and the others still
run. The master's remoting address comes from the name server's answer to
registration (RegisterBrokerResult.masterAddr); a slave that knows none
copies nothing. tidemq syncs at once when it learns the address, then every
`interval_s`, so a slave serves reads soon after it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tidemq.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.timer_progress import decode_progress, save_master_progress
from tidemq.broker.topics import DataVersion, TopicConfig, TopicConfigManager
from tidemq.common.atomic_file import write_atomically
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import RemotingClient
from tidemq.transport.errors import RemotingError

__all__ = ["SYNC_INTERVAL_S", "SlaveSync"]

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0
"""RocketMQ's period (scheduleAtFixedRate(..., 1000 * 3, 1000 * 10))."""
_TIMEOUT_S = 3.0


class SyncError(Exception):
    """One table could not be copied; the text says why."""


class SlaveSync:
    def __init__(
        self,
        client: RemotingClient,
        *,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        delay_progress: Path,
        timer_progress: Path | None = None,
        own_address: Callable[[], str],
        interval_s: float = SYNC_INTERVAL_S,
    ) -> None:
        self._client = client
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.delay_progress = delay_progress
        self.timer_progress = timer_progress
        """Where the master's timer progress is kept (None: not copied)."""
        self._own_address = own_address
        self.interval_s = interval_s
        self.master_address: str | None = None
        self._learned = asyncio.Event()
        self.rounds = 0
        """Complete rounds (every table copied)."""
        self._failing: set[str] = set()

    def learn_master(self, address: str | None) -> None:
        """The master's remoting address from a registration answer."""
        if address and address != self.master_address:
            log.info("master at %s: copying its topics, groups and offsets", address)
            self.master_address = address
            self._learned.set()

    async def run(self) -> None:
        """Copy at once when the master is known, then every interval (an owned task)."""
        while True:
            if self.master_address is not None:
                await self.sync_all()
            self._learned.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._learned.wait()

    async def sync_all(self) -> bool:
        """One round; True when every table was copied."""
        master = self.master_address
        if master is None or master == self._own_address():
            return False
        steps: tuple[tuple[str, Callable[[str], Awaitable[None]]], ...] = (
            ("topic configs", self._sync_topics),
            ("consumer offsets", self._sync_offsets),
            ("delay offsets", self._sync_delay_offsets),
            ("subscription groups", self._sync_groups),
        )
        if self.timer_progress is not None:
            steps += (("timer progress", self._sync_timer_progress),)
        complete = True
        for what, step in steps:
            try:
                await step(master)
            except (SyncError, RemotingError, OSError, ValueError) as exc:
                complete = False
                if what not in self._failing:
                    log.warning("copying %s from master %s failed: %s", what, master, exc)
                self._failing.add(what)
                continue
            if what in self._failing:
                self._failing.discard(what)
                log.info("copying %s from master %s works again", what, master)
        if complete:
            self.rounds += 1
        return complete

    async def _call(self, master: str, code: RequestCode) -> bytes:
        response = await self._client.invoke(master, RemotingCommand.request(code, {}), _TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise SyncError(f"{code.name} answered {response.code}: {response.remark}")
        return response.body or b""

    async def _document(self, master: str, code: RequestCode) -> dict[str, Any]:
        document = json.loads(await self._call(master, code))
        if not isinstance(document, dict):
            raise SyncError(f"{code.name}: expected a JSON object")
        return document

    async def _sync_topics(self, master: str) -> None:
        document = await self._document(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        configs = [
            TopicConfig.from_json(raw, name)
            for name, raw in _table(document, "topicConfigTable").items()
        ]
        version = DataVersion.from_json(document.get("dataVersion"))
        if self.topics.adopt(configs, version):
            log.info("topic configs copied from master %s (%d topics)", master, len(configs))

    async def _sync_offsets(self, master: str) -> None:
        document = await self._document(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = {
            str(key): {int(queue): int(offset) for queue, offset in _object(queues).items()}
            for key, queues in _table(document, "offsetTable").items()
        }
        self.offsets.adopt(table)

    async def _sync_delay_offsets(self, master: str) -> None:
        body = await self._call(master, RequestCode.GET_ALL_DELAY_OFFSET)
        _table(json.loads(body), "offsetTable")  # what a scheduler can load, or refused
        write_atomically(self.delay_progress, body)

    async def _sync_groups(self, master: str) -> None:
        document = await self._document(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        configs = [
            SubscriptionGroupConfig.from_json(raw, name)
            for name, raw in _table(document, "subscriptionGroupTable").items()
        ]
        version = DataVersion.from_json(document.get("dataVersion"))
        if self.groups.adopt(configs, version):
            log.info("subscription groups copied from master %s (%d)", master, len(configs))

    async def _sync_timer_progress(self, master: str) -> None:
        assert self.timer_progress is not None
        body = await self._call(master, RequestCode.GET_TIMER_CHECK_POINT)
        try:
            progress = decode_progress(body)
        except ValueError as exc:
            raise SyncError(str(exc)) from None
        save_master_progress(self.timer_progress, progress)


def _object(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise SyncError(f"expected a JSON object, got {type(raw).__name__}")
    return raw


def _table(document: object, key: str) -> dict[str, Any]:
    return _object(_object(document).get(key) or {})
