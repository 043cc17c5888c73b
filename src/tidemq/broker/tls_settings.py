"""Which TLS each of a broker's ports speaks, from its BrokerConfig fields.

The remoting port takes RocketMQ's three modes (tidemq.transport.tls). Left
unset, the mode is RocketMQ's default, permissive, when a certificate is
given (apache/rocketmq rocketmq-all-5.2.0, TlsSystemConfig.java
``tls.server.mode``), and disabled without one.

The gRPC endpoint follows, with the same three modes (the RocketMQ proxy's
gRPC port reads tls.server.mode too: proxy/.../grpc/ProxyAndTlsProtocolNegotiator.java)
and the same client verification; ``grpc_tls_mode`` gives it a mode of its
own. With the mode left unset and a certificate given, gRPC is TLS only
(enforcing), as the endpoint's TLS option always was, while the remoting
port is permissive. How each mode is served is the endpoint's business
(tidemq.grpc.server: grpc's own TLS, or a TLS front for permissive and
optional client certificates).
"""

from __future__ import annotations

from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfig, TlsConfigError, TlsMode

__all__ = ["client_tls", "grpc_tls", "remoting_tls"]


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
) -> ServerTls:
    """The gRPC endpoint's TLS; TlsConfigError, naming the gRPC endpoint, when it cannot work.

    `mode_given`: the remoting port's mode was set explicitly (gRPC then follows it)."""
    if (grpc_cert is None) != (grpc_key is None):
        raise TlsConfigError("grpc_tls_cert and grpc_tls_key go together")
    cert = grpc_cert or remoting.cert
    key = grpc_key or remoting.key
    if grpc_mode:
        mode = TlsMode.parse(grpc_mode)
    elif grpc_cert is not None or not mode_given:
        mode = TlsMode.ENFORCING if cert is not None else TlsMode.DISABLED
    else:
        mode = remoting.mode
    if mode is TlsMode.DISABLED:
        return ServerTls()
    if cert is None or key is None:
        raise TlsConfigError(
            f"the gRPC endpoint's TLS mode {mode.value} needs a certificate and its key "
            "(--tls-cert and --tls-key, or grpc_tls_cert and grpc_tls_key; `tidemq cert` "
            "makes a development pair)"
        )
    try:
        return ServerTls(mode, cert, key, remoting.ca, remoting.verify_client)
    except TlsConfigError as exc:
        raise TlsConfigError(f"the gRPC endpoint: {exc}") from exc


def client_tls(
    enabled: bool, ca: str | None, cert: str | None, key: str | None, check_hostname: bool
) -> TlsConfig | None:
    """How a broker dials its name servers, controllers or master (None: plain)."""
    if not enabled:
        return None
    return TlsConfig(ca=ca, cert=cert, key=key, check_hostname=check_hostname)


def _default_mode(cert: str | None) -> TlsMode:
    return TlsMode.PERMISSIVE if cert is not None else TlsMode.DISABLED
