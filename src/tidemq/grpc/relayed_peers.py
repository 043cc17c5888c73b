"""Who is really behind a connection the TLS front relays to grpc.

With the front (tls_front.py) in place, grpc serves its calls on a private
Unix socket, so ``context.peer()`` names the front's end of that socket
(``unix:/tmp/tidemq-grpc-.../c17``), not the client. The front writes here,
for each connection it relays, the peer string grpc would have shown for
the client itself (``ipv4:10.0.0.7:51234``); the ACL check and the servicer
read through ``real`` so address rules (whiteRemoteAddress) and client
listings see the client. Without a front nothing is written and ``real``
returns what grpc says.
"""

from __future__ import annotations

from urllib.parse import unquote

__all__ = ["RelayedPeers", "grpc_peer"]


def grpc_peer(host: str, port: int) -> str:
    """`host`:`port` as grpc writes a TCP peer: "ipv4:10.0.0.1:5000", "ipv6:%5B::1%5D:5000"."""
    if ":" in host:
        return f"ipv6:%5B{host}%5D:{port}"
    return f"ipv4:{host}:{port}"


class RelayedPeers:
    """The clients of relayed connections, by the peer string grpc shows for each."""

    __slots__ = ("_real",)

    def __init__(self) -> None:
        self._real: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._real)

    def add(self, relayed: str, real: str) -> None:
        """From now on a call on `relayed` (grpc's peer string) is `real`'s."""
        self._real[unquote(relayed)] = real

    def remove(self, relayed: str) -> None:
        self._real.pop(unquote(relayed), None)

    def real(self, peer: str) -> str:
        """The client's peer string for grpc's `peer`; `peer` itself when it is
        not relayed (no front, or a connection already gone: its "unix:..."
        matches no address rule, so a late call cannot pass as anyone)."""
        if not self._real:
            return peer
        return self._real.get(unquote(peer), peer)
