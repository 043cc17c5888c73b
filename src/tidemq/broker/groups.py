"""Subscription groups: per consumer group settings, in `config/subscriptionGroup.json`.

File layout (RocketMQ's SubscriptionGroupManager)::

    {"subscriptionGroupTable": {"<group>": {"groupName": "<group>",
       "consumeEnable": true, "consumeFromMinEnable": true,
       "consumeBroadcastEnable": true, "retryQueueNums": 1, "retryMaxTimes": 16,
       "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
       "notifyConsumerIdsChangedEnable": true, "groupSysFlag": 0,
       "consumeTimeoutMinute": 15, "consumeMessageOrderly": false}, ...},
     "forbiddenTable": {},
     "dataVersion": {"timestamp": <ms>, "counter": <n>}}

A group is created on first sight (heartbeat, pull, send-back) when
auto-creation is on, as RocketMQ's `autoCreateSubscriptionGroup` does; the
system groups always exist. Writes are atomic (common.atomic_file).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidemq.broker.topics import DataVersion, PersistedTable, parse_table, read_json_file
from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.common.names import validate_group_name

log = logging.getLogger(__name__)

GROUPS_FILE = "subscriptionGroup.json"
DEFAULT_RETRY_MAX_TIMES = 16

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
"""MixAll.CID_RMQ_SYS_PREFIX: what MixAll.isSysConsumerGroup looks for."""


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """RocketMQ's SubscriptionGroupConfig (JSON names in `to_json`)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    consume_message_orderly: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "groupSysFlag": self.group_sys_flag,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "consumeMessageOrderly": self.consume_message_orderly,
        }

    @classmethod
    def from_json(cls, raw: object, name: str | None = None) -> SubscriptionGroupConfig:
        """Parse one group config (unknown keys ignored); ValueError if malformed."""
        if not isinstance(raw, dict):
            raise ValueError("a subscription group config must be a JSON object")
        group = raw.get("groupName", name)
        if not isinstance(group, str):
            raise ValueError("groupName must be a string")
        default = cls(group)
        return cls(
            group_name=group,
            consume_enable=_bool(raw, "consumeEnable", default.consume_enable),
            consume_from_min_enable=_bool(
                raw, "consumeFromMinEnable", default.consume_from_min_enable
            ),
            consume_broadcast_enable=_bool(
                raw, "consumeBroadcastEnable", default.consume_broadcast_enable
            ),
            retry_queue_nums=_int(raw, "retryQueueNums", default.retry_queue_nums),
            retry_max_times=_int(raw, "retryMaxTimes", default.retry_max_times),
            broker_id=_int(raw, "brokerId", default.broker_id),
            which_broker_when_consume_slowly=_int(
                raw, "whichBrokerWhenConsumeSlowly", default.which_broker_when_consume_slowly
            ),
            notify_consumer_ids_changed_enable=_bool(
                raw, "notifyConsumerIdsChangedEnable", default.notify_consumer_ids_changed_enable
            ),
            group_sys_flag=_int(raw, "groupSysFlag", default.group_sys_flag),
            consume_timeout_minute=_int(
                raw, "consumeTimeoutMinute", default.consume_timeout_minute
            ),
            consume_message_orderly=_bool(
                raw, "consumeMessageOrderly", default.consume_message_orderly
            ),
        )


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{key} must be true or false, got {value!r}")


def _int(raw: dict[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {value!r}") from None


class GroupError(Exception):
    """A group operation was refused; `str()` is the remark for the client."""


class SubscriptionGroupManager(PersistedTable):
    """The broker's subscription group table. Use from the event loop only."""

    def __init__(
        self, config_dir: Path, *, auto_create: bool = True, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.path = config_dir / GROUPS_FILE
        self.auto_create = auto_create
        self.clock = clock
        self.data_version = DataVersion()
        self._table: dict[str, SubscriptionGroupConfig] = {}
        self._forbidden: dict[str, Any] = {}
        self.unsaved = False
        """A change could not be written (a full disk): `persist` is due."""

    def load(self) -> None:
        document = read_json_file(self.path)
        if document is not None:
            for config in parse_table(
                self.path,
                document,
                "subscriptionGroupTable",
                SubscriptionGroupConfig.from_json,
                "group",
            ):
                self._table[config.group_name] = config
            forbidden = document.get("forbiddenTable")
            self._forbidden = forbidden if isinstance(forbidden, dict) else {}
            self.data_version = DataVersion.from_json(document.get("dataVersion"))
        changed = document is None
        for group in SYSTEM_GROUPS:
            if group not in self._table:
                self._table[group] = SubscriptionGroupConfig(group)
                changed = True
        if changed:
            self.data_version.next_version(self.clock.now_ms())
            self.persist()

    def serialize(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {
                name: config.to_json() for name, config in sorted(self._table.items())
            },
            "forbiddenTable": self._forbidden,
            "dataVersion": self.data_version.to_json(),
        }

    def _changed(self) -> None:
        self.data_version.next_version(self.clock.now_ms())
        self._persist_or_defer()

    def adopt(self, configs: Iterable[SubscriptionGroupConfig], version: DataVersion) -> bool:
        """A slave takes its master's groups whole when the master's data
        version differs (SlaveSynchronize.syncSubscriptionGroupConfig)."""
        if version == self.data_version:
            return False
        self._table = {config.group_name: config for config in configs}
        self.data_version = DataVersion(version.timestamp, version.counter)
        self._persist_or_defer()
        return True

    # -- reads ----------------------------------------------------------------

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config without creating it."""
        return self._table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with defaults when auto-creation is on
        (or the group is a system group) and the name is valid."""
        config = self._table.get(group)
        if config is not None:
            return config
        if not (self.auto_create or is_system_group(group)):
            return None
        if validate_group_name(group) is not None:
            return None
        config = SubscriptionGroupConfig(group)
        self._table[group] = config
        log.info("subscription group %s auto-created", group)
        self._changed()
        return config

    def __contains__(self, group: object) -> bool:
        return group in self._table

    def __iter__(self) -> Iterator[SubscriptionGroupConfig]:
        return iter(list(self._table.values()))

    def names(self) -> list[str]:
        return sorted(self._table)

    # -- changes ----------------------------------------------------------------

    def update(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        problem = validate_group_name(config.group_name)
        if problem is not None:
            raise GroupError(problem)
        if config.retry_queue_nums < 0:
            raise GroupError("retryQueueNums must not be negative")
        if config.retry_max_times < -1:
            raise GroupError("retryMaxTimes must be -1 or more")
        self._table[config.group_name] = config
        log.info("subscription group %s updated: %s", config.group_name, config.to_json())
        self._changed()
        return config

    def delete(self, group: str) -> bool:
        if is_system_group(group):
            raise GroupError(f"the group {group} is a system group and cannot be deleted")
        if self._table.pop(group, None) is None:
            return False
        log.info("subscription group %s deleted", group)
        self._changed()
        return True
