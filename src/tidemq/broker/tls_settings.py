"""Which TLS each of a broker's ports speaks, from its BrokerConfig fields.

The remoting port takes RocketMQ's three modes (tidemq.transport.tls). Left
unset, the mode is RocketMQ's default, permissive, when a certificate is
given (apache/rocketmq rocketmq-all-5.2.0, TlsSystemConfig.java
``tls.server.mode``), and disabled without one.

The gRPC endpoint follows, where grpc-python can: it serves a port either
plaintext or TLS (``add_insecure_port`` / ``add_secure_port``), never both,
so an explicit ``permissive`` is refused for it (``grpc_tls_mode`` may
choose its own mode), and it can require a client certificate or not ask
for one, but not ask for one optionally. With the mode left unset and a
certificate given, gRPC is TLS only, as the endpoint's TLS option always was.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfig, TlsConfigError, TlsMode

__all__ = ["GrpcTls", "grpc_tls", "namesrv_client_tls", "remoting_tls"]


@dataclass(frozen=True)
class GrpcTls:
    """The gRPC endpoint's TLS: cert/key (None: plaintext), a CA, required client certs."""

    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    require_client_auth: bool = False


def remoting_tls(
    mode: str | None,
    cert: str | None,
    key: str | None,
    ca: str | None,
    verify_client: str,
) -> ServerTls:
    """The remoting (and name-server) port's TLS; TlsConfigError when it cannot work."""
    chosen = TlsMode.parse(mode) if mode else _default_mode(cert)
    return ServerTls(chosen, cert, key, ca, ClientAuth.parse(verify_client))


def grpc_tls(
    remoting: ServerTls,
    mode_given: bool,
    grpc_mode: str | None,
    grpc_cert: str | None,
    grpc_key: str | None,
) -> GrpcTls:
    """The gRPC endpoint's TLS; TlsConfigError for what grpc-python cannot do."""
    cert = grpc_cert or remoting.cert
    key = grpc_key or remoting.key
    if grpc_mode:
        mode = TlsMode.parse(grpc_mode)
    elif grpc_cert is not None or not mode_given:
        mode = TlsMode.ENFORCING if cert is not None else TlsMode.DISABLED
    else:
        mode = remoting.mode
    if mode is TlsMode.DISABLED:
        return GrpcTls()
    if mode is TlsMode.PERMISSIVE:
        raise TlsConfigError(
            "the gRPC endpoint cannot be in TLS permissive mode: grpc-python serves a port "
            "either plaintext or TLS, not both (turn gRPC off with --no-grpc / grpc_port null, "
            "or give it its own mode with grpc_tls_mode=enforcing or disabled)"
        )
    if cert is None or key is None:
        raise TlsConfigError("the gRPC endpoint's TLS needs a certificate and its key")
    verify = remoting.verify_client
    if verify is ClientAuth.OPTIONAL:
        raise TlsConfigError(
            "the gRPC endpoint cannot verify client certificates optionally (grpc-python "
            "requires one or asks for none): use require or none, or turn gRPC off"
        )
    return GrpcTls(cert, key, remoting.ca, verify is ClientAuth.REQUIRE)


def namesrv_client_tls(
    enabled: bool, ca: str | None, cert: str | None, key: str | None, check_hostname: bool
) -> TlsConfig | None:
    """How a broker connects to its name servers (None: plain)."""
    if not enabled:
        return None
    return TlsConfig(ca=ca, cert=cert, key=key, check_hostname=check_hostname)


def _default_mode(cert: str | None) -> TlsMode:
    return TlsMode.PERMISSIVE if cert is not None else TlsMode.DISABLED
