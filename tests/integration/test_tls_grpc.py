"""The gRPC endpoint's TLS under `tidemq serve` (real processes, raw v2 stubs).

Every mode x client verification the endpoint serves, against four clients
(plain, TLS without a certificate, TLS with one from --tls-ca, TLS with one
from an unknown CA): grpc's own TLS for enforcing with none/require, the
TLS front for permissive and optional. Through the front, the access
control still sees the client's address (globalWhiteRemoteAddresses and an
account's whiteRemoteAddress, on TLS and plain connections, and a policy
change without a restart); a stop leaves nothing behind. The official
clients on a permissive port: tests/interop/test_official_grpc_tls.py.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc
from tls_support import Certs, serve_args

from tidemq.acl.credentials import Credentials
from tidemq.acl.grpc_auth import client_headers
from tidemq.client.admin import AdminClient
from tidemq.testing.certs import Pair
from tidemq.testing.client_support import grpc_send_request, read_topic
from tidemq.testing.processes import started
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

RPC_TIMEOUT_S = 20.0
Code = pb.Code


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


def stub_call(
    endpoint: str,
    credentials: grpc.ChannelCredentials | None,
    method: str,
    request: object,
    metadata: tuple[tuple[str, str], ...] = (),
) -> object:
    """One unary call's response; grpc.RpcError when the channel fails."""
    channel = (
        grpc.secure_channel(endpoint, credentials)
        if credentials is not None
        else grpc.insecure_channel(endpoint)
    )
    with channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        return getattr(stub, method)(request, metadata=metadata, timeout=RPC_TIMEOUT_S)


def query_route(endpoint: str, credentials: grpc.ChannelCredentials | None) -> int:
    """QueryRoute's status code; grpc.RpcError when the channel fails."""
    request = spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic"))
    response = stub_call(endpoint, credentials, "QueryRoute", request)
    return int(response.status.code)  # type: ignore[attr-defined]


def tls(certs: Certs, shown: Pair | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=certs.ca.cert.read_bytes(),
        private_key=shown.key.read_bytes() if shown else None,
        certificate_chain=shown.cert.read_bytes() if shown else None,
    )


SERVED, REFUSED = "served", "refused"


@pytest.mark.parametrize(
    ("mode", "verify", "plain", "no_cert", "ca_cert", "unknown_ca"),
    [
        ("disabled", "none", SERVED, REFUSED, REFUSED, REFUSED),
        # grpc's own TLS
        ("enforcing", "none", REFUSED, SERVED, SERVED, SERVED),
        ("enforcing", "require", REFUSED, REFUSED, SERVED, REFUSED),
        # the TLS front
        ("enforcing", "optional", REFUSED, SERVED, SERVED, REFUSED),
        ("permissive", "none", SERVED, SERVED, SERVED, SERVED),
        ("permissive", "optional", SERVED, SERVED, SERVED, REFUSED),
        ("permissive", "require", SERVED, REFUSED, SERVED, REFUSED),
    ],
)
def test_each_mode_and_client_verification(
    tmp_path: Path,
    certs: Certs,
    mode: str,
    verify: str,
    plain: str,
    no_cert: str,
    ca_cert: str,
    unknown_ca: str,
) -> None:
    args = serve_args(tmp_path, *certs.server_args(mode, verify))
    with started(args, tmp_path, "serve") as (_, ready):
        endpoint = ready["grpc"]
        clients = {
            "plain": (None, plain),
            "TLS without a certificate": (tls(certs, None), no_cert),
            "TLS with a certificate from --tls-ca": (tls(certs, certs.client), ca_cert),
            "TLS with a certificate from an unknown CA": (tls(certs, certs.stranger), unknown_ca),
        }
        outcomes = {}
        for name, (credentials, _) in clients.items():
            try:
                assert query_route(endpoint, credentials) == Code.TOPIC_NOT_FOUND
                outcomes[name] = SERVED
            except grpc.RpcError as exc:
                assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc  # type: ignore[attr-defined]
                outcomes[name] = REFUSED
        assert outcomes == {name: expected for name, (_, expected) in clients.items()}


ADMIN = Credentials("adminKey01", "adminSecret01")
APP = ("appKey0001", "appSecret0001")


def policy(global_white: str, app_white: str) -> str:
    return f"""\
globalWhiteRemoteAddresses: [{global_white}]
accounts:
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
  - accessKey: appKey0001
    secretKey: appSecret0001
    whiteRemoteAddress: {app_white}
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB|SUB]
"""


def signed(access_key: str, secret_key: str) -> tuple[tuple[str, str], ...]:
    return tuple(client_headers(access_key, secret_key, datetime.now(UTC)).items())


def test_address_rules_see_the_real_client_through_the_front(tmp_path: Path, certs: Certs) -> None:
    """A policy letting 127.0.0.1 in admits unsigned calls arriving through the
    front, on TLS and plain connections alike; one naming another address does
    not, and the refusal is logged with the client's address, not the front's."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(policy("10.9.9.9", "10.9.9.8"), encoding="utf-8")
    args = serve_args(tmp_path, *certs.server_args("permissive", "optional"))
    args += ["--acl", str(acl), "--set", "acl_poll_interval_s=0.2"]
    with started(args, tmp_path, "serve") as (server, ready):
        endpoint = ready["grpc"]

        async def create() -> None:
            async with AdminClient(ready["namesrv"], credentials=ADMIN) as admin:
                await admin.create_topic("Orders", queues=1)

        asyncio.run(create())
        connections = {"TLS": tls(certs, None), "plain": None}

        def send(credentials: grpc.ChannelCredentials | None, body: bytes, *meta: str) -> int:
            metadata = signed(*meta) if meta else ()
            request = grpc_send_request("Orders", body)
            response = stub_call(endpoint, credentials, "SendMessage", request, metadata)
            return int(response.status.code)  # type: ignore[attr-defined]

        # no rule names 127.0.0.1: unsigned is refused, a wrong secret too
        for name, credentials in connections.items():
            assert send(credentials, b"anonymous " + name.encode()) == Code.UNAUTHORIZED
            assert send(credentials, b"wrong", APP[0], "wrongSecret1") == Code.UNAUTHORIZED
        wait_until(
            lambda: "refused SendMessage from 127.0.0.1 (no_access_key)" in server.stderr(),
            "the refusal logged with the client's address",
        )
        assert "from unix:" not in server.stderr()

        # the account's whiteRemoteAddress names 127.0.0.1: admitted without a signature check
        acl.write_text(policy("10.9.9.9", "127.0.0.1"), encoding="utf-8")
        wait_until(
            lambda: send(None, b"white account plain", APP[0], "wrongSecret1") == Code.OK,
            "the account's address rule taken without a restart",
        )
        assert send(tls(certs, None), b"white account TLS", APP[0], "wrongSecret1") == Code.OK

        # globalWhiteRemoteAddresses names 127.0.0.1: anyone from here is admitted
        acl.write_text(policy("127.0.0.1", "10.9.9.8"), encoding="utf-8")
        wait_until(
            lambda: send(None, b"global white plain") == Code.OK,
            "the global address rule taken without a restart",
        )
        assert send(tls(certs, None), b"global white TLS") == Code.OK

        stored = asyncio.run(read_topic(ready["namesrv"], "Orders"))
        bodies = {m.body for m in stored}
        assert {b"white account TLS", b"global white TLS"} <= bodies
        assert not any(b.startswith((b"anonymous", b"wrong")) for b in bodies)


def test_a_stop_leaves_nothing_behind(
    tmp_path: Path, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM with a connection open through the front: exit 0, and the
    private directory of grpc's socket is gone."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))  # the server's environment copies ours
    args = serve_args(tmp_path, *certs.server_args("permissive", "none"))
    with started(args, tmp_path, "serve") as (server, ready):
        banner = "".join(server.output)
        assert "permissive (TLS and plain on the port)" in banner, banner
        assert [p.name.startswith("tidemq-grpc-") for p in private.iterdir()] == [True]
        with grpc.insecure_channel(ready["grpc"]) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            request = spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic"))
            answer = stub.QueryRoute(request, timeout=RPC_TIMEOUT_S)
            assert answer.status.code == Code.TOPIC_NOT_FOUND
            assert server.stop(signal.SIGTERM) == 0
        assert list(private.iterdir()) == []
        assert "Traceback" not in server.stderr()
