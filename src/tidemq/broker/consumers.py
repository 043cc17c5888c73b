"""Who is connected: consumer groups and producer groups learned from HEART_BEAT.

HEART_BEAT body (RocketMQ's HeartbeatData, as ali-ons and Java send it)::

    {"clientID": "192.0.2.2@21555",
     "consumerDataSet": [{"groupName": "CG", "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [{"topic": "T", "subString": "TagA || TagC",
           "classFilterMode": false, "tagsSet": ["TagA", "TagC"],
           "codeSet": [2598919, 2598921], "subVersion": 1795321339918,
           "expressionType": "TAG"}], "unitMode": false}],
     "producerDataSet": [{"groupName": "PG"}]}

Members are keyed by client id within a group and remember the connection
they last heartbeated on. A member leaves on UNREGISTER_CLIENT, when its
connection closes, or after `expiry_s` (120 s) without a heartbeat (the
connection is then closed, as Java does). When a consumer group's
membership or subscriptions change, `on_change(group, members)` is called so
the broker can push NOTIFY_CONSUMER_IDS_CHANGED to the remaining members.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tidemq.common.clock import SYSTEM_CLOCK, Clock
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.heartbeat import (
    CLUSTERING,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_PASSIVELY,
    ConsumerData,
    Subscription,
)

log = logging.getLogger(__name__)


class ClientConnection(Protocol):
    """What this module needs of a transport connection."""

    @property
    def id(self) -> object: ...

    @property
    def remote(self) -> tuple[str, int]: ...

    @property
    def closed(self) -> bool: ...

    def send(self, command: RemotingCommand) -> Any: ...

    def send_oneway(self, command: RemotingCommand) -> Any: ...

    def close(self) -> Any: ...


@runtime_checkable
class AskableConnection(Protocol):
    """A client connection the broker can send a request on and await the answer
    (a remoting connection; a gRPC client's Telemetry stream is not one)."""

    async def request(
        self, command: RemotingCommand, timeout: float, *, owned: bool = False
    ) -> RemotingCommand: ...


# -- tables ---------------------------------------------------------------------


@dataclass(slots=True)
class ClientChannel:
    """One client (by client id) of a group and the connection it uses."""

    client_id: str
    connection: ClientConnection
    language: str = "JAVA"
    version: int = 0
    last_update: float = 0.0

    @property
    def address(self) -> str:
        host, port = self.connection.remote[:2]
        return f"{host}:{port}"


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: str = CONSUME_PASSIVELY
    message_model: str = CLUSTERING
    consume_from_where: str = CONSUME_FROM_LAST_OFFSET
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    last_update: float = 0.0

    def client_ids(self) -> list[str]:
        return sorted(self.channels)


ChangeListener = Callable[[str, list[ClientChannel]], None]


class ConsumerManager:
    """Consumer groups: members, subscriptions and liveness."""

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        expiry_s: float = 120.0,
        on_change: ChangeListener | None = None,
    ) -> None:
        self.clock = clock
        self.expiry_s = expiry_s
        self.on_change = on_change
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def register(
        self,
        data: ConsumerData,
        client_id: str,
        connection: ClientConnection,
        *,
        language: str = "JAVA",
        version: int = 0,
        notify: bool = True,
    ) -> bool:
        """Add or refresh a member; True when membership or subscriptions changed."""
        now = self.clock.monotonic()
        info = self._groups.get(data.group_name)
        if info is None:
            info = self._groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        info.last_update = now
        channel = info.channels.get(client_id)
        joined = channel is None or channel.connection.id != connection.id
        if channel is None or joined:
            info.channels[client_id] = ClientChannel(client_id, connection, language, version, now)
        else:
            channel.last_update = now
        subscriptions_changed = self._update_subscriptions(info, data.subscriptions)
        changed = joined or subscriptions_changed
        if changed:
            log.info(
                "consumer group %s: %s %s (%d members)",
                data.group_name,
                client_id,
                "joined" if joined else "changed subscriptions",
                len(info.channels),
            )
            if notify:
                self._notify(info)
        return changed

    @staticmethod
    def _update_subscriptions(
        info: ConsumerGroupInfo, subscriptions: Iterable[Subscription]
    ) -> bool:
        new = {sub.topic: sub for sub in subscriptions}
        old = info.subscriptions
        changed = set(new) != set(old) or any(
            not new[topic].same_filter(old[topic]) for topic in new
        )
        if changed or any(new[t].sub_version > old[t].sub_version for t in new):
            info.subscriptions = new
        return changed

    def unregister(self, group: str, client_id: str, *, notify: bool = True) -> bool:
        info = self._groups.get(group)
        if info is None or info.channels.pop(client_id, None) is None:
            return False
        log.info("consumer group %s: %s left (%d members)", group, client_id, len(info.channels))
        if not info.channels:
            del self._groups[group]
        elif notify:
            self._notify(info)
        return True

    def connection_closed(self, connection: ClientConnection, *, notify: bool = True) -> list[str]:
        """Drop every member that used `connection`; the groups that changed."""
        changed = []
        for info in list(self._groups.values()):
            gone = [cid for cid, ch in info.channels.items() if ch.connection.id == connection.id]
            for client_id in gone:
                del info.channels[client_id]
            if gone:
                changed.append(info.group)
                if not info.channels:
                    del self._groups[info.group]
                elif notify:
                    self._notify(info)
        return changed

    def client_ids_on(self, connection: ClientConnection) -> set[str]:
        """The client ids that heartbeated over `connection`."""
        return {
            client_id
            for info in self._groups.values()
            for client_id, channel in info.channels.items()
            if channel.connection.id == connection.id
        }

    def scan_expired(self, *, notify: bool = True) -> list[ClientChannel]:
        """Remove members silent for longer than the expiry; returns them
        (the caller closes their connections)."""
        deadline = self.clock.monotonic() - self.expiry_s
        expired: list[ClientChannel] = []
        for info in list(self._groups.values()):
            stale = [ch for ch in info.channels.values() if ch.last_update < deadline]
            for channel in stale:
                del info.channels[channel.client_id]
                log.info("consumer %s of %s expired", channel.client_id, info.group)
            expired.extend(stale)
            if stale:
                if not info.channels:
                    del self._groups[info.group]
                elif notify:
                    self._notify(info)
        return expired

    def _notify(self, info: ConsumerGroupInfo) -> None:
        if self.on_change is not None:
            self.on_change(info.group, list(info.channels.values()))

    # -- reads ----------------------------------------------------------------

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self._groups.get(group)

    def client_ids(self, group: str) -> list[str]:
        info = self._groups.get(group)
        return [] if info is None else info.client_ids()

    def find_subscription(self, group: str, topic: str) -> Subscription | None:
        info = self._groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def groups_subscribing(self, topic: str) -> list[str]:
        return sorted(g for g, info in self._groups.items() if topic in info.subscriptions)

    def groups(self) -> list[str]:
        return sorted(self._groups)


class ProducerManager:
    """Producer groups: members and liveness (no notifications)."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, expiry_s: float = 120.0) -> None:
        self.clock = clock
        self.expiry_s = expiry_s
        self._groups: dict[str, dict[str, ClientChannel]] = {}

    def register(
        self,
        group: str,
        client_id: str,
        connection: ClientConnection,
        *,
        language: str = "JAVA",
        version: int = 0,
    ) -> None:
        now = self.clock.monotonic()
        members = self._groups.setdefault(group, {})
        channel = members.get(client_id)
        if channel is None or channel.connection.id != connection.id:
            members[client_id] = ClientChannel(client_id, connection, language, version, now)
        else:
            channel.last_update = now

    def unregister(self, group: str, client_id: str) -> bool:
        members = self._groups.get(group)
        if members is None or members.pop(client_id, None) is None:
            return False
        if not members:
            del self._groups[group]
        return True

    def connection_closed(self, connection: ClientConnection) -> None:
        for group, members in list(self._groups.items()):
            for client_id in [c for c, ch in members.items() if ch.connection.id == connection.id]:
                del members[client_id]
            if not members:
                del self._groups[group]

    def uses(self, connection: ClientConnection) -> bool:
        return any(
            channel.connection.id == connection.id
            for members in self._groups.values()
            for channel in members.values()
        )

    def scan_expired(self) -> list[ClientChannel]:
        deadline = self.clock.monotonic() - self.expiry_s
        expired: list[ClientChannel] = []
        for group, members in list(self._groups.items()):
            stale = [ch for ch in members.values() if ch.last_update < deadline]
            for channel in stale:
                del members[channel.client_id]
            expired.extend(stale)
            if not members:
                del self._groups[group]
        return expired

    def members(self, group: str) -> list[ClientChannel]:
        return sorted(self._groups.get(group, {}).values(), key=lambda ch: ch.client_id)

    def groups(self) -> list[str]:
        return sorted(self._groups)
