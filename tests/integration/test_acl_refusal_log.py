"""Refusals in a real `tidemq serve --acl` process's log: one line per client address and
reason, whichever protocol and however often the client retries, and never a secret key,
a password or a signature (RocketMQ 5.3's audit log does print the signature:
rocketmq-all-5.3.3 ``DefaultAuthenticationProvider.doAuditLog``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.acl.grpc_auth import client_headers
from tidemq.acl.signing import sign_fields
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.testing.client_support import grpc_send_request
from tidemq.testing.processes import ServerProcess, started
from tidemq.testing.waiting import wait_until
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow

KEY, SECRET = "appKey0001", "appSecret0001"
WRONG = "wrongSecret77"
POLICY = f"""\
accounts:
  - accessKey: {KEY}
    secretKey: {SECRET}
    defaultTopicPerm: PUB
"""
RETRIES = 5


def refusal_lines(server: ServerProcess, reason: str) -> list[str]:
    return [line for line in server.stderr().splitlines() if f"({reason})" in line]


async def remoting_sends(
    address: str, secret: str | None, times: int
) -> list[tuple[str | None, RemotingCommand]]:
    """SEND_MESSAGE requests signed with `secret` (None: unsigned): (Signature, answer)."""
    client = RemotingClient()
    answers = []
    try:
        for i in range(times):
            fields = {"topic": "Orders", "producerGroup": "PG", "queueId": "0", "n": str(i)}
            if secret is not None:
                fields = sign_fields(fields, b"body", KEY, secret)
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"body")
            answer = await client.invoke(address, request, 5.0)
            answers.append((fields.get("Signature"), answer))
    finally:
        await client.close()
    return answers


async def grpc_sends(endpoint: str, secret: str, times: int) -> list[str]:
    """SendMessage calls signed with `secret`; the authorization headers sent."""
    sent = []
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for _ in range(times):
            headers = client_headers(KEY, secret, datetime.now(UTC))
            sent.append(headers["authorization"])
            metadata = [("x-mq-client-id", "log-test@1"), *headers.items()]
            response = await stub.SendMessage(
                grpc_send_request("Orders", b"x"), metadata=metadata, timeout=10
            )
            assert response.status.code == 40100, response.status
    return sent


def test_refusals_are_logged_once_per_client_and_reason_and_never_with_a_secret(
    tmp_path: Path,
) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(POLICY, encoding="utf-8")
    args = ["serve", "--data-dir", str(tmp_path / "data"), "--acl", str(acl)]
    args += ["--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0"]
    with started(args, tmp_path, "serve") as (server, ready):
        wrong = asyncio.run(remoting_sends(ready["broker"], WRONG, RETRIES))
        assert {answer.code for _, answer in wrong} == {ResponseCode.NO_PERMISSION}
        signatures = [signature for signature, _ in wrong]
        wait_until(lambda: refusal_lines(server, "bad_signature"), "the bad signature logged")

        # the same client and reason over gRPC: counted, not logged again
        authorizations = asyncio.run(grpc_sends(ready["grpc"], WRONG, RETRIES))
        # another reason from the same client: one more line, after all of the above
        unsigned = asyncio.run(remoting_sends(ready["broker"], None, RETRIES))
        assert {answer.code for _, answer in unsigned} == {ResponseCode.NO_PERMISSION}
        wait_until(lambda: refusal_lines(server, "no_access_key"), "the unsigned sends logged")

        (bad_signature,) = refusal_lines(server, "bad_signature")
        (no_access_key,) = refusal_lines(server, "no_access_key")
        assert "refused SEND_MESSAGE from 127.0.0.1" in bad_signature
        assert f"Check signature failed for accessKey={KEY}" in bad_signature
        assert "No accessKey is configured" in no_access_key
        log = server.stderr()
        assert log.count(" refused ") == 2, log
        for secret in (SECRET, WRONG):
            assert secret not in log
        for signature in signatures:
            assert signature and signature not in log
        for authorization in authorizations:
            assert authorization.rpartition("Signature=")[2] not in log
        assert server.stop() == 0
