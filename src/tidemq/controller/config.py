"""The controller's settings, with RocketMQ's names (ControllerConfig) where there is one.

=============================  ===========================  =================================
tidemq                         RocketMQ                     what
=============================  ===========================  =================================
enable_controller_in_namesrv   enableControllerInNamesrv    run a controller in the name server
controller_port                (controllerDLegerPeers)      this controller's Raft port
controller_peers               controllerDLegerPeers        all controllers' Raft host:port, ;
controller_dir                 controllerStorePath          the Raft journal and snapshot
scan_not_active_broker_ms      scanNotActiveBrokerInterval  dead-master scan period (5 s)
enable_elect_unclean_master    enableElectUncleanMaster     elect outside the SyncStateSet
=============================  ===========================  =================================

The controller answers brokers on the name server's own port (brokers set
``controller_addr`` to the name servers' addresses); the controllers talk
Raft among themselves on ``controller_port``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ControllerConfig", "parse_addresses"]


def parse_addresses(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"h:p;h:p"`` (Java's separator; ``,`` accepted too) or a list, as a
    tuple; ValueError naming a malformed one."""
    items = text if isinstance(text, list | tuple) else text.replace(",", ";").split(";")
    found: list[str] = []
    for raw in items:
        item = str(raw).strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not a host:port address: {item!r}")
        found.append(item)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    raft_address: str
    """This controller's Raft ``host:port``."""
    peers: tuple[str, ...] = ()
    """Every controller's Raft address (this one's included or not)."""
    data_dir: Path = Path("controller-data")
    scan_interval_s: float = 5.0
    """scanNotActiveBrokerInterval."""
    elect_unclean: bool = False
    """enableElectUncleanMaster."""

    def __post_init__(self) -> None:
        parse_addresses(self.raft_address)
        object.__setattr__(self, "peers", parse_addresses(self.peers))
        if self.scan_interval_s <= 0:
            raise ValueError("the controller's scan interval must be > 0")

    @property
    def partners(self) -> tuple[str, ...]:
        """The other controllers' Raft addresses."""
        return tuple(p for p in self.peers if p != self.raft_address)

    @property
    def majority(self) -> int:
        return (len(self.partners) + 1) // 2 + 1
