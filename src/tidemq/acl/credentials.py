"""A client's ACL 1.0 credentials, and the signing of each request it sends.

``Credentials(access_key, secret_key[, security_token])`` is what every
tidemq client class takes (``credentials=``), as RocketMQ's Java client
takes ``SessionCredentials`` in an AclClientRPCHook. ``sign`` is that hook:
the transport calls it on every request just before the frame is encoded
(rocketmq-all-4.9.8 ``acl/.../common/AclClientRPCHook.java``
doBeforeRequest), so every request of the client is signed, whatever path
built it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidemq.protocol.command import RemotingCommand

from .signing import sign_fields

__all__ = ["ACCESS_KEY_ENV", "SECRET_KEY_ENV", "Credentials"]

ACCESS_KEY_ENV = "TIDEMQ_ACCESS_KEY"
SECRET_KEY_ENV = "TIDEMQ_SECRET_KEY"


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret (never shown in a repr or an error)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("credentials need both an access key and a secret key")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials | None:
        """From TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY; None when neither is set."""
        env = os.environ if environ is None else environ
        access_key, secret_key = env.get(ACCESS_KEY_ENV), env.get(SECRET_KEY_ENV)
        if not access_key and not secret_key:
            return None
        if not access_key or not secret_key:
            raise ValueError(f"set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither")
        return cls(access_key, secret_key)

    def sign(self, request: RemotingCommand) -> None:
        """Give `request` new ext fields with AccessKey (SecurityToken) and
        Signature; the old mapping, which the caller may still hold, is not changed."""
        request.ext_fields = sign_fields(
            request.ext_fields or {},
            request.body,
            self.access_key,
            self.secret_key,
            self.security_token,
        )
