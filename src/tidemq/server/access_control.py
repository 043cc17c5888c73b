"""A broker's access control, put together: the policy file, the 5.x users and ACLs, one gate.

The users and ACLs (``AuthStore``, data_dir/config/auth.json) are always
kept and served to admins, and judge requests only when access control is
on (``acl_file`` or ``auth_enabled``). Their changes reach the gate at once
(``AclGate.use_auth``); a changed file reaches it through the poll.

Bootstrap, so that turning access control on never leaves a way in for
anonymous callers nor locks every admin out: ``auth_init_user`` creates its
Super user when no user has that name; without a policy file, a broker with
``auth_enabled`` and no enabled Super user does not start (nobody could
ever administer it). An empty policy admits nobody: no global white
addresses, no accounts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidemq.acl.auth_model import AuthModelError, User, UserType
from tidemq.acl.auth_store import FILE_NAME, AuthStore
from tidemq.acl.gate import AclGate
from tidemq.acl.plain_config import PlainAclConfig
from tidemq.acl.policy_file import PolicyFile
from tidemq.acl.validator import AclPolicy
from tidemq.broker.config import BrokerConfig
from tidemq.common.clock import Clock

__all__ = ["AccessControl", "open_access_control"]

log = logging.getLogger("tidemq.acl")


@dataclass
class AccessControl:
    store: AuthStore
    gate: AclGate | None = None
    """None: access control is off (every request admitted)."""
    policy_file: PolicyFile | None = None


def _bootstrap(store: AuthStore, init_user: str | None) -> None:
    if init_user is None:
        return
    name, _, password = init_user.partition(":")
    if store.state.user(name) is None:
        store.create_user(User(name, password, UserType.SUPER))
        log.info("created the initial Super user %s", name)


def open_access_control(config: BrokerConfig, clock: Clock) -> AccessControl:
    """Read everything (AclConfigError / AuthModelError when it cannot be used: no start)."""
    store = AuthStore(config.config_dir / FILE_NAME)
    _bootstrap(store, config.auth_init_user)
    if not config.access_control:
        return AccessControl(store)
    policy_file: PolicyFile | None = None
    if config.acl_file is not None:
        policy_file = PolicyFile(config.acl_file, clock, interval_s=config.acl_poll_interval_s)
        policy = policy_file.policy
    else:
        if not store.state.has_super_user():
            raise AuthModelError(
                "access control is on and no enabled Super user exists: give "
                "auth_init_user NAME:PASSWORD (tidemq serve --auth-init-user) to create one"
            )
        policy = AclPolicy(PlainAclConfig())
    gate = AclGate(policy.with_auth(store.state), name=f"broker-{config.broker_name}")
    store.on_change = gate.use_auth
    if policy_file is not None:
        policy_file.on_change = gate.use
    log.info(
        "access control on: %s; %d user(s), %d ACL(s) (RocketMQ 5 model)",
        policy_file.path if policy_file is not None else "no policy file",
        len(store.state.users),
        len(store.state.acls),
    )
    return AccessControl(store, gate, policy_file)
