"""TLS settings for the remoting ports (server side) and for clients, as ``ssl`` contexts.

The server modes are RocketMQ's (apache/rocketmq rocketmq-all-5.2.0,
remoting/.../netty/TlsSystemConfig.java ``tls.server.mode`` and
NettyRemotingServer.java ``TlsModeHandler``):

* ``disabled``: plain only; a peer opening with a TLS record is closed.
* ``permissive``: plain and TLS on the same port, told apart by the first
  byte (0x16, a TLS handshake record, starts TLS).
* ``enforcing``: TLS only; a plain peer is closed.

Client verification is ``tls.server.need.client.auth``: none, optional
(a certificate, if sent, must chain to ``ca``) or require. RocketMQ's default
mode is permissive, backed by a self-signed certificate it makes itself
(``tls.test.mode.enable``, TlsHelper.java); tidemq makes no certificate of
its own, so its default is disabled and a mode that needs a certificate
without one is refused before anything listens.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "TLS_HANDSHAKE_BYTE",
    "ClientAuth",
    "ServerTls",
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "client_tls",
]

TLS_HANDSHAKE_BYTE = 0x16
"""The first byte of a TLS ClientHello (record type handshake, 22)."""


class TlsConfigError(ValueError):
    """TLS settings that cannot work (a mode without its certificate, an unreadable file)."""


_Choice = TypeVar("_Choice", bound=enum.Enum)


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str | TlsMode) -> TlsMode:
        return _choice(cls, text, "TLS mode")


class ClientAuth(enum.Enum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"

    @classmethod
    def parse(cls, text: str | ClientAuth) -> ClientAuth:
        return _choice(cls, text, "client verification")


def _choice(kind: type[_Choice], text: str | _Choice, what: str) -> _Choice:
    """`text` as one of `kind`'s values (any case, spaces around ignored), or a
    TlsConfigError naming `what` and the values allowed."""
    if isinstance(text, kind):
        return text
    try:
        return kind(str(text).strip().lower())
    except ValueError:
        names = ", ".join(str(choice.value) for choice in kind)
        raise TlsConfigError(f"{what} {text!r}: must be one of {names}") from None


@dataclass(frozen=True)
class ServerTls:
    """A listening port's TLS: the mode, its certificate and key, and whom it trusts."""

    mode: TlsMode = TlsMode.DISABLED
    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    """PEM CA certificates a client certificate must chain to."""
    verify_client: ClientAuth = ClientAuth.NONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", TlsMode.parse(self.mode))
        object.__setattr__(self, "verify_client", ClientAuth.parse(self.verify_client))
        if self.mode is TlsMode.DISABLED:
            return
        if self.cert is None or self.key is None:
            raise TlsConfigError(
                f"TLS mode {self.mode.value} needs a certificate and its key "
                "(--tls-cert and --tls-key; `tidemq cert` makes a development pair)"
            )
        if self.verify_client is not ClientAuth.NONE and self.ca is None:
            raise TlsConfigError(
                f"client verification {self.verify_client.value} needs the CA that signs "
                "client certificates (--tls-ca)"
            )

    @property
    def enabled(self) -> bool:
        return self.mode is not TlsMode.DISABLED

    def context(self) -> ssl.SSLContext | None:
        """The server context (None when disabled); TlsConfigError names a file that fails."""
        if not self.enabled:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        assert self.cert is not None and self.key is not None
        _load(lambda: context.load_cert_chain(self.cert or "", self.key), self.cert, self.key)
        if self.ca is not None:
            _load(lambda: context.load_verify_locations(cafile=self.ca), self.ca)
        context.verify_mode = {
            ClientAuth.NONE: ssl.CERT_NONE,
            ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
            ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
        }[self.verify_client]
        return context


@dataclass(frozen=True)
class TlsConfig:
    """A client's TLS: whom it trusts, what certificate it shows, whether names are checked."""

    ca: str | None = None
    """PEM CA certificates the server's must chain to; None: the system's trust store."""
    cert: str | None = None
    """A client certificate (for a server that verifies clients), with `key`."""
    key: str | None = None
    check_hostname: bool = True
    """The server's certificate must name the host connected to (as browsers do)."""

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise TlsConfigError("a client certificate and its key go together")

    def context(self) -> ssl.SSLContext:
        """Verifying the server; a certificate in `ca` is trusted as is, CA or
        not (OpenSSL's partial chains, Python 3.13's default), so a server's
        own certificate can be pinned."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        if self.ca is not None:
            _load(lambda: context.load_verify_locations(cafile=self.ca), self.ca)
        if self.cert is not None:
            _load(lambda: context.load_cert_chain(self.cert or "", self.key), self.cert, self.key)
        context.check_hostname = self.check_hostname  # the chain is verified either way
        return context


def client_tls(tls: bool | TlsConfig | None) -> TlsConfig | None:
    """A client's ``tls=`` argument as a config: True is the system's trust store."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return TlsConfig()
    if isinstance(tls, TlsConfig):
        return tls
    raise TypeError(f"tls must be True, False or a TlsConfig, got {type(tls).__name__}")


def _load(action: Callable[[], object], *files: str | None) -> None:
    """Run a context's file loading; a failure names the files."""
    try:
        action()
    except (OSError, ssl.SSLError) as exc:
        shown = ", ".join(f for f in files if f)
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise TlsConfigError(f"cannot load {shown}: {reason}") from exc
