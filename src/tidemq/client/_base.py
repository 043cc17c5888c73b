"""What every asyncio client object shares: ``async with`` over start/shutdown,
the group name check, the ClientConfig built from the common arguments, and
the running/shut-down checks with one wording for all of them.

Kept apart from the clients so that the producer, the push consumer, the
lite pull consumer and the admin client agree on these details by
construction rather than by copy.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from types import TracebackType
from typing import ClassVar, Self

from tidemq.acl.credentials import Credentials
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.protocol import ResponseCode
from tidemq.transport.tls import TlsConfig, client_tls

__all__ = [
    "DEFAULT_CONSUMER_GROUP",
    "AsyncClient",
    "GroupClient",
    "check_group",
    "make_client_config",
]

DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
"""Java's placeholder consumer group name, refused as a real group."""

_VALID_GROUP = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
"""Java Validators.checkGroup: what brokers accept as a group name."""

_SHUT_DOWN_STATES = frozenset({"closing", "closed", "stopping", "stopped"})


def check_group(group: object, role: str) -> str:
    """`group` when it is a valid `role` ("producer", "consumer") group name, else ValueError."""
    if not isinstance(group, str) or _VALID_GROUP.fullmatch(group) is None:
        raise ValueError(
            f"{role} group {group!r} is invalid: 1 to 255 characters of [%|a-zA-Z0-9_-]"
        )
    if role == "consumer" and group == DEFAULT_CONSUMER_GROUP:
        raise ValueError(f"{DEFAULT_CONSUMER_GROUP} is a placeholder: name your group")
    return group


def make_client_config(
    namesrv: str | Sequence[str],
    instance_name: str | None,
    config: ClientConfig | None,
    credentials: Credentials | None = None,
    tls: bool | TlsConfig | None = None,
) -> ClientConfig:
    """The caller's `config`, else one for `namesrv` named `instance_name` (when
    given); `credentials` and `tls`, when given, replace the config's (the
    caller's config object is not changed). `tls=True` trusts the system's CAs."""
    tls_config = client_tls(tls)
    if config is not None:
        if credentials is not None:
            config = dataclasses.replace(config, credentials=credentials)
        if tls_config is not None:
            config = dataclasses.replace(config, tls=tls_config)
        return config
    config = ClientConfig(namesrv=namesrv, credentials=credentials, tls=tls_config)
    if instance_name is not None:
        config.instance_name = instance_name
    return config


class AsyncClient:
    """``async with client:`` starts it and shuts it down at the end."""

    async def start(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()


class GroupClient(AsyncClient):
    """A producer or consumer: a group, a ClientConfig and a life-cycle state.

    Subclasses set ``_group``, ``_config`` and ``_state`` ("created",
    "running", and one of the shut-down states) and name their ``_kind``.
    """

    _kind: ClassVar[str]
    """What the error messages call this client ("producer", "consumer")."""
    _group: str
    _config: ClientConfig
    _state: str

    @property
    def group(self) -> str:
        return self._group

    @property
    def client_id(self) -> str:
        return self._config.client_id

    def _check_open(self) -> None:
        """ClientError once shutdown has begun."""
        if self._state in _SHUT_DOWN_STATES:
            raise ClientError(f"{self._kind} {self._group} is shut down", ResponseCode.SYSTEM_ERROR)

    def _check_running(self) -> None:
        """ClientError unless started and not shut down."""
        if self._state != "running":
            why = "not started (await start() first)" if self._state == "created" else "shut down"
            raise ClientError(f"{self._kind} {self._group} is {why}", ResponseCode.SYSTEM_ERROR)
