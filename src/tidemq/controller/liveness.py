"""Which replicas are alive: the controller's heartbeat table, pure (clock injected).

RocketMQ's DefaultBrokerHeartbeatManager keeps, per broker, the time of its
last BROKER_HEARTBEAT and the timeout it asked for (heartbeatTimeoutMills,
the broker's controllerHeartBeatTimeoutMills, 10 s by default), with the
epoch, max offset and election priority the election ranks by
(BrokerLiveInfo). A broker is alive while its last heartbeat is younger than
its timeout. The table is each controller's own: it is not replicated (Java
keeps it on the leader only; tidemq's brokers beat to every controller, so a
newly elected leader knows who is alive at once).
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.common.clock import Clock

from .state import LiveInfo

__all__ = ["DEFAULT_HEARTBEAT_TIMEOUT_MS", "LiveTable"]

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000
"""BrokerConfig.controllerHeartBeatTimeoutMills."""


@dataclass(slots=True)
class _Beat:
    address: str
    last_ms: int
    timeout_ms: int
    info: LiveInfo


class LiveTable:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._beats: dict[tuple[str, int], _Beat] = {}

    def beat(
        self, broker_name: str, broker_id: int, address: str, timeout_ms: int, info: LiveInfo
    ) -> None:
        timeout = timeout_ms if timeout_ms > 0 else DEFAULT_HEARTBEAT_TIMEOUT_MS
        self._beats[(broker_name, broker_id)] = _Beat(address, self._clock.now_ms(), timeout, info)

    def alive(self, broker_name: str, broker_id: int) -> bool:
        beat = self._beats.get((broker_name, broker_id))
        return beat is not None and self._clock.now_ms() - beat.last_ms < beat.timeout_ms

    def info(self, broker_name: str, broker_id: int) -> LiveInfo:
        beat = self._beats.get((broker_name, broker_id))
        return beat.info if beat is not None else LiveInfo()

    def forget_dead(self) -> list[tuple[str, int, str]]:
        """Drop the replicas whose heartbeats stopped; (name, id, address) of each."""
        now = self._clock.now_ms()
        dead = [key for key, b in self._beats.items() if now - b.last_ms >= b.timeout_ms]
        gone = [(name, i, self._beats.pop((name, i)).address) for name, i in dead]
        return gone
