"""The gRPC endpoint under `tidemq serve --tls-mode enforcing --tls-verify-client require`.

It speaks TLS only and requires a client certificate from --tls-ca: a
channel with one is answered, one from another CA or without any is not,
and a plaintext channel gets nothing. (permissive and optional are refused
for gRPC before the server starts: test_tls_cluster_cli.py.)
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc
from tls_support import Certs, serve_args

from tidemq.testing.certs import Pair
from tidemq.testing.processes import started

pytestmark = pytest.mark.slow

RPC_TIMEOUT_S = 20.0


def query_route(endpoint: str, credentials: grpc.ChannelCredentials | None) -> int:
    """QueryRoute's status code; grpc.RpcError when the channel fails."""
    channel = (
        grpc.secure_channel(endpoint, credentials)
        if credentials is not None
        else grpc.insecure_channel(endpoint)
    )
    with channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic"))
        return int(stub.QueryRoute(request, timeout=RPC_TIMEOUT_S).status.code)


def tls(certs: Certs, shown: Pair | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=certs.ca.cert.read_bytes(),
        private_key=shown.key.read_bytes() if shown else None,
        certificate_chain=shown.cert.read_bytes() if shown else None,
    )


def test_grpc_requires_a_client_certificate_from_the_ca(tmp_path: Path) -> None:
    certs = Certs(tmp_path / "certs")
    args = serve_args(tmp_path, *certs.server_args("enforcing", "require"))
    with started(args, tmp_path, "serve") as (_, ready):
        endpoint = ready["grpc"]
        assert query_route(endpoint, tls(certs, certs.client)) == pb.Code.TOPIC_NOT_FOUND
        for refused in (tls(certs, certs.stranger), tls(certs, None), None):
            with pytest.raises(grpc.RpcError) as caught:
                query_route(endpoint, refused)
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
