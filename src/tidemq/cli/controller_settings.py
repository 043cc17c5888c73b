"""The embedded controller's settings, from `tidemq namesrv`'s --config file and flags.

The file is JSON with the keys of `tidemq.controller.config` (RocketMQ's
namesrv.properties names, snake_case): ``enable_controller_in_namesrv``,
``controller_port``, ``controller_peers``, ``controller_dir``,
``scan_not_active_broker_ms``, ``enable_elect_unclean_master``. A flag wins
over the file. Unknown keys are refused (a typo would silently turn the
controller off).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tidemq.controller.config import ControllerConfig, parse_addresses

__all__ = ["controller_config"]

_KEYS = {
    "enable_controller_in_namesrv",
    "controller_port",
    "controller_peers",
    "controller_dir",
    "scan_not_active_broker_ms",
    "enable_elect_unclean_master",
}


def _read(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the name server config {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"the name server config {path} is not a JSON object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(
            f"unknown name server settings in {path}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    return raw


def controller_config(
    path: Path | None,
    *,
    host: str,
    port: int,
    enable: bool | None,
    raft_port: int | None,
    peers: str | None,
    data_dir: Path | None,
) -> ControllerConfig | None:
    """The controller to run, or None when it is not enabled; ValueError if unusable."""
    raw = _read(path)
    if not (enable if enable is not None else bool(raw.get("enable_controller_in_namesrv"))):
        return None
    chosen_port = raft_port or raw.get("controller_port") or (port + 1 if port else None)
    if not isinstance(chosen_port, int) or not 0 < chosen_port < 65536:
        raise ValueError("the controller needs --controller-port (the name server's port is 0)")
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    raft_address = f"{shown_host}:{chosen_port}"
    peer_list = parse_addresses(peers if peers is not None else raw.get("controller_peers", ""))
    if peer_list and raft_address not in peer_list:
        raise ValueError(
            f"the controller's own Raft address {raft_address} is not among "
            f"--controller-peers {';'.join(peer_list)}"
        )
    directory = data_dir or Path(
        raw.get("controller_dir") or Path("controller-data") / str(chosen_port)
    )
    return ControllerConfig(
        raft_address=raft_address,
        peers=peer_list,
        data_dir=Path(directory),
        scan_interval_s=float(raw.get("scan_not_active_broker_ms", 5000)) / 1000,
        elect_unclean=bool(raw.get("enable_elect_unclean_master", False)),
    )
