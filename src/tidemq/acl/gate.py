"""The check in front of a server's request table: admit, or answer NO_PERMISSION.

The policy is the file's (ACL 1.0) with the broker's RocketMQ 5 users and
ACLs (``use_auth``): an access key the file names is judged by the file, any
other by the users and ACLs (see docs/access-control.md).

The gRPC endpoint asks the same gate (``grpc_authenticate`` for a call,
``grpc_authorize`` for each of its requests): one policy, reloaded once, and
one set of counters and log lines for both protocols.

One ``AclGate`` per server holds the policy in force (swapped whole when the
file changes), answers a refused request with NO_PERMISSION (16) and the
validator's remark, counts refusals per reason (``refusals()``, for metrics)
and logs one line per (client address, reason), so a client retrying in a
loop does not flood the log. Nothing reaches a processor once refused, so
nothing is stored, consumed or changed; the connection stays open.

RocketMQ 4.9.8 and 5.2.0 answer an ACL 1.0 refusal SYSTEM_ERROR with the
exception's class name and a stack frame in the remark
(``remoting/.../netty/NettyRemotingAbstract.java`` processRequestCommand);
its ACL 2.0 (apache/rocketmq HEAD, ``broker/.../auth/pipeline/
AuthorizationPipeline.java``) answers NO_PERMISSION with the message alone,
which is what clients can act on; tidemq does that, with ACL 1.0's messages.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence

from tidemq.protocol.codes import ResponseCode, request_code_name
from tidemq.protocol.command import RemotingCommand

from . import grpc_validator
from .auth_model import AuthState
from .grpc_validator import GrpcCaller
from .permissions import Permission
from .plain_config import PlainAccessAccount
from .validator import AclPolicy, Denial, Reason, client_host, validate

__all__ = ["AclGate"]

log = logging.getLogger("tidemq.acl")

_LOGGED_LIMIT = 4096
"""(client, reason) pairs remembered as logged; the oldest is forgotten beyond this."""


class AclGate:
    """Admits or refuses each request under the current policy."""

    def __init__(
        self,
        policy: AclPolicy,
        *,
        name: str = "server",
        trusted: Sequence[PlainAccessAccount] = (),
    ) -> None:
        """`trusted`: accounts added to every policy, whatever the file says (a
        process's own internal account: tidemq serve's broker to its name server)."""
        self._trusted = tuple(trusted)
        self._auth = policy.auth
        self._policy = policy.with_accounts(self._trusted)
        self._name = name
        self._refusals: Counter[Reason] = Counter()
        self._logged: OrderedDict[tuple[str, Reason], None] = OrderedDict()

    @property
    def policy(self) -> AclPolicy:
        return self._policy

    def use(self, policy: AclPolicy) -> None:
        """Apply `policy` (a re-read file) to the requests that arrive from now
        on, with the RocketMQ 5 users and ACLs in force."""
        self._policy = policy.with_accounts(self._trusted).with_auth(self._auth)

    def use_auth(self, auth: AuthState) -> None:
        """Apply `auth` (users and ACLs just changed) from now on, with the file's rules."""
        self._auth = auth
        self._policy = self._policy.with_auth(auth)

    def is_super(self, access_key: str) -> bool:
        """Whether `access_key` signs as a Super user now: an enabled RocketMQ 5
        Super user, or an ``admin: true`` account of the file (which RocketMQ's
        migration to 5.x makes a Super user)."""
        owned = self._policy.account(access_key)
        if owned is not None:
            return owned.account.admin
        user = self._policy.user(access_key)
        return user is not None and user.is_super and user.enabled

    def refusals(self) -> dict[str, int]:
        """Refused requests per reason since start (every reason listed, zeros too)."""
        return {reason.value: self._refusals[reason] for reason in Reason}

    def check(
        self, request: RemotingCommand, remote_host: str, *, admin_only: bool = False
    ) -> RemotingCommand | None:
        """None to go on to the request's handler, else the refusal to send back."""
        host = client_host(remote_host)
        denial = validate(self._policy, request, host, require_admin=admin_only)
        if denial is None:
            return None
        self._refused(host, denial, request_code_name(request.code))
        return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, denial.remark)

    def grpc_authenticate(
        self,
        rpc: str,
        metadata: Mapping[str, str],
        remote_host: str,
        now_ms: int,
        max_skew_ms: int | None,
    ) -> GrpcCaller | Denial:
        """Who a gRPC call (`rpc`, its `metadata`) is, or why it is refused (counted,
        logged); `max_skew_ms` None: no clock window (grpc_validator.authenticate)."""
        host = client_host(remote_host)
        outcome = grpc_validator.authenticate(self._policy, metadata, host, now_ms, max_skew_ms)
        if isinstance(outcome, Denial):
            self._refused(host, outcome, rpc)
        return outcome

    def grpc_authorize(
        self, rpc: str, caller: GrpcCaller, needs: Callable[[], list[tuple[str, Permission]]]
    ) -> Denial | None:
        """None when `caller` may have what `needs()` says now, else the refusal
        (counted, logged); `needs()` raising ValueError is a BAD_REQUEST refusal."""
        try:
            needed = needs()
        except (ValueError, RecursionError) as exc:
            denial: Denial | None = Denial(
                Reason.BAD_REQUEST, str(exc)[:300] or "the request cannot be read"
            )
        else:
            denial = grpc_validator.authorize(self._policy, caller, needed)
        if denial is not None:
            self._refused(caller.host, denial, rpc)
        return denial

    def _refused(self, host: str, denial: Denial, what: str) -> None:
        self._refusals[denial.reason] += 1
        self._log_once(host, denial.reason, what, denial.remark)

    def _log_once(self, host: str, reason: Reason, what: str, remark: str) -> None:
        key = (host, reason)
        if key in self._logged:
            return
        self._logged[key] = None
        if len(self._logged) > _LOGGED_LIMIT:
            self._logged.popitem(last=False)
        log.warning(
            "%s: refused %s from %s (%s): %s; further refusals of %s for this reason "
            "are counted, not logged",
            self._name,
            what,
            host,
            reason.value,
            remark,
            host,
        )
