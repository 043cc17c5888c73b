"""Access control on the name server: its writes need an admin account.

RocketMQ checks no ACL on the name server at all (rocketmq-all-4.9.8,
rocketmq-all-5.2.0 and HEAD: ``namesrv/.../NamesrvController.java``
registers no ACL hook, only 5.x's ZoneRouteRPCHook), so anyone who reaches
it may register a broker of their own (and take over a topic's route) or
delete a topic's route. Here, with a policy, the requests that change the
route table (REGISTER_BROKER, UNREGISTER_BROKER, DELETE_TOPIC_IN_NAMESRV,
WIPE_/ADD_WRITE_PERM_OF_BROKER)
need a signed admin account (or a white address, as on the broker), and so
do the embedded controller's (BROKER_HEARTBEAT, CONTROLLER_REGISTER_BROKER,
CONTROLLER_ELECT_MASTER, CONTROLLER_ALTER_SYNC_STATE_SET: RocketMQ's
controller checks none either); reads
(routes, cluster info, topic lists, KV) stay open as in RocketMQ, so clients
without credentials still find brokers, which then refuse them.

A broker registering, or calling the controller, signs with its
``acl_access_key``/``acl_secret_key`` (RocketMQ 5's innerClientAuthenticationCredentials, HEAD
``broker/.../out/BrokerOuterAPI.java``); `tidemq serve` gives its own
broker a per-process account that only the two of them know (``trusted``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tidemq.acl.credentials import Credentials
from tidemq.acl.gate import AclGate
from tidemq.acl.plain_config import PlainAccessAccount
from tidemq.acl.policy_file import PolicyFile
from tidemq.common.clock import Clock
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.transport import Connection

__all__ = ["WRITE_CODES", "NamesrvAccess"]

WRITE_CODES = frozenset(
    int(code)
    for code in (
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
    )
)
"""The name server's requests that change what clients are told, and those that
change what its embedded controller decides (who is alive, who is master, who is
in sync: a forged ELECT_MASTER could make a lagging replica master)."""


class NamesrvAccess:
    """The policy file, the gate, and the check the name server's RemotingServer calls."""

    def __init__(
        self,
        path: str | Path,
        clock: Clock,
        *,
        interval_s: float,
        trusted: Sequence[Credentials] = (),
    ) -> None:
        """AclConfigError if the file cannot be used."""
        self.file = PolicyFile(path, clock, interval_s=interval_s)
        accounts = [
            PlainAccessAccount(access_key=c.access_key, secret_key=c.secret_key, admin=True)
            for c in trusted
        ]
        self.gate = AclGate(self.file.policy, name="namesrv", trusted=accounts)
        self.file.on_change = self.gate.use

    def check(self, request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        if request.code not in WRITE_CODES:
            return None
        return self.gate.check(request, connection.remote[0], admin_only=True)
