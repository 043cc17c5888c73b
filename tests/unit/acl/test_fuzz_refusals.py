"""Fuzzing what a caller or an operator can put in front of access control: the remoting
gate with a known access key (file account or RocketMQ 5 user) and a bad Signature (bad
Base64, huge, missing, not ASCII) or huge fields; the gRPC interceptor with a known key's
header mangled, on the three kinds of call; a policy file rewritten with random YAML or
bytes while in force; a users file (auth.json) of random JSON; the user/ACL admin codes
with random headers and bodies. Each gets a clear refusal (or a clear error naming what is
wrong), never an exception, never a secret in the text, and never an admission it should
not get. (The parsers' own fuzz tests: test_grpc_auth, test_signing, test_plain_config,
test_gate, tests/unit/grpc/test_acl_interceptor.)"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from tidemq.acl.auth_model import AuthModelError, AuthState, User, UserType
from tidemq.acl.auth_store import AuthStore
from tidemq.acl.gate import AclGate
from tidemq.acl.grpc_auth import (
    DATE_TIME,
    GrpcAuthError,
    client_headers,
    parse_authorization,
    sign,
)
from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.policy_file import PolicyFile
from tidemq.acl.signing import sign_fields
from tidemq.acl.validator import AclPolicy
from tidemq.broker.auth_admin import AuthAdmin
from tidemq.common.clock import ManualClock
from tidemq.grpc.acl_interceptor import AclInterceptor
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

FILE_KEY, FILE_SECRET = "fileKey001", "fileSecret01"
USER_KEY, USER_SECRET = "alice", "aliceSecret01"
SECRETS = (FILE_SECRET, USER_SECRET)
POLICY = AclPolicy(
    parse_plain_acl(
        f"accounts:\n  - {{accessKey: {FILE_KEY}, secretKey: {FILE_SECRET}, admin: true}}\n"
    ),
    AuthState({USER_KEY: User(USER_KEY, USER_SECRET, UserType.SUPER)}),
)
"""Both keys may do anything: any refusal below is the signature's (or the request's)."""

_SIGNATURES = st.one_of(
    st.text(max_size=60),
    st.binary(max_size=40).map(lambda b: b.hex()),
    st.just("!!!not base64!!!"),
    st.just("A" * 300_000),
    st.just("\udcff\ud800"),
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=40
    ),
)
_VALUES = st.one_of(st.text(max_size=40), st.just("v" * 200_000), st.just("\udcff"))
_CODES = st.sampled_from([int(c) for c in RequestCode] + [-1, 0, 99_999])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    code=_CODES,
    key_secret=st.sampled_from([(FILE_KEY, FILE_SECRET), (USER_KEY, USER_SECRET)]),
    fields=st.dictionaries(
        st.sampled_from(["topic", "b", "consumerGroup", "group", "SecurityToken"])
        | st.text(max_size=12),
        _VALUES,
        max_size=6,
    ),
    signature=st.one_of(st.none(), _SIGNATURES),
    body=st.one_of(st.binary(max_size=200), st.just(b"{" * 50_000)),
)
def test_the_remoting_gate_never_admits_a_bad_signature_of_a_known_key(
    code: int,
    key_secret: tuple[str, str],
    fields: dict[str, str],
    signature: str | None,
    body: bytes,
) -> None:
    key, secret = key_secret
    fields = {k: v for k, v in fields.items() if k not in ("AccessKey", "Signature")}
    correct = sign_fields(fields, body, key, secret)["Signature"]
    if signature == correct:
        return
    request = RemotingCommand(code=code, version=500, ext_fields=dict(fields), body=body)
    request.ext_fields["AccessKey"] = key
    if signature is not None:
        request.ext_fields["Signature"] = signature
    response = AclGate(POLICY).check(request, "127.0.0.1")
    assert response is not None, "admitted without the right signature"
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark and len(response.remark) <= 400
    assert not any(secret in response.remark for secret in SECRETS)


@settings(max_examples=100, deadline=None)
@given(code=_CODES, key=st.sampled_from([FILE_KEY, USER_KEY]), body=st.binary(max_size=100))
def test_the_right_signature_of_a_known_key_is_never_refused_for_it(
    code: int, key: str, body: bytes
) -> None:
    """The other side of the property above (both keys may do anything): a refusal of a
    correctly signed request can only be a request that cannot be read."""
    secret = FILE_SECRET if key == FILE_KEY else USER_SECRET
    request = RemotingCommand(
        code=code, version=500, ext_fields=sign_fields({"topic": "T"}, body, key, secret), body=body
    )
    response = AclGate(POLICY).check(request, "127.0.0.1")
    if response is not None:
        assert "signature" not in (response.remark or "").lower(), response.remark


# -- the gRPC interceptor, every kind of call ---------------------------------------------------


class _Context:
    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self.metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


class _Details:
    def __init__(self, method: str) -> None:
        self.method = method


SEEN: list[Any] = []


async def _unary(request: Any, context: Any) -> Any:
    SEEN.append(request)
    return spb.SendMessageResponse(status=pb.Status(code=pb.Code.OK))


async def _stream(request: Any, context: Any) -> AsyncIterator[Any]:
    SEEN.append(request)
    yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.Code.OK))


async def _telemetry(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    async for command in requests:
        SEEN.append(command)
        yield spb.TelemetryCommand(status=pb.Status(code=pb.Code.OK))


_KINDS = {
    "SendMessage": grpc.unary_unary_rpc_method_handler(_unary),
    "ReceiveMessage": grpc.unary_stream_rpc_method_handler(_stream),
    "Telemetry": grpc.stream_stream_rpc_method_handler(_telemetry),
}
_REQUESTS = {
    "SendMessage": spb.SendMessageRequest(
        messages=[pb.Message(topic=pb.Resource(name="T"), body=b"x")]
    ),
    "ReceiveMessage": spb.ReceiveMessageRequest(
        group=pb.Resource(name="G"), message_queue=pb.MessageQueue(topic=pb.Resource(name="T"))
    ),
    "Telemetry": spb.TelemetryCommand(
        settings=pb.Settings(publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
    ),
}


async def _answers(rpc: str, metadata: list[tuple[str, str]]) -> list[Any]:
    clock = ManualClock()
    interceptor = AclInterceptor(AclGate(POLICY), clock)

    async def continuation(details: Any) -> Any:
        return _KINDS[rpc]

    handler = await interceptor.intercept_service(
        continuation, _Details(f"/apache.rocketmq.v2.MessagingService/{rpc}")
    )
    context = _Context(metadata)
    if rpc == "SendMessage":
        return [await handler.unary_unary(_REQUESTS[rpc], context)]
    if rpc == "ReceiveMessage":
        return [r async for r in handler.unary_stream(_REQUESTS[rpc], context)]

    async def commands() -> AsyncIterator[Any]:
        yield _REQUESTS[rpc]

    return [r async for r in handler.stream_stream(commands(), context)]


_NOW = datetime.fromtimestamp(ManualClock().now_ms() / 1000, UTC)


def _still_verifies(headers: dict[str, str], key: str, date: str, signature: bytes) -> bool:
    """Whether mangled headers still name `key`, its signature and the date (what
    RocketMQ's parser reads: items trimmed, Credential=KEY/scope, unknown items ignored)."""
    if headers.get(DATE_TIME) != date or "authorization" not in headers:
        return False
    try:
        parsed = parse_authorization(headers["authorization"])
    except GrpcAuthError:
        return False
    return parsed.access_key == key and parsed.signature == signature


@st.composite
def _mangled_headers(draw: st.DrawFn) -> tuple[list[tuple[str, str]], bool]:
    """A known key's real headers with one part replaced, removed or inflated, and
    whether they still verify."""
    key, secret = draw(st.sampled_from([(FILE_KEY, FILE_SECRET), (USER_KEY, USER_SECRET)]))
    headers = client_headers(key, secret, _NOW)
    date, good = headers[DATE_TIME], sign(secret, headers[DATE_TIME])
    part = draw(st.sampled_from(["signature", "date", "credential", "scheme", "drop", "huge"]))
    value = draw(st.text(max_size=50) | st.just(good.upper()) | st.just("/scope"))
    authorization = headers["authorization"]
    if part == "signature":
        authorization = authorization.replace(good, value)
    elif part == "date":
        headers[DATE_TIME] = value
    elif part == "credential":
        authorization = authorization.replace(f"Credential={key}", f"Credential={key}{value}")
    elif part == "scheme":
        authorization = value + " " + authorization.partition(" ")[2]
    elif part == "drop":
        headers.pop(draw(st.sampled_from([DATE_TIME, "authorization"])))
    else:  # longer than any header is read
        authorization += ", Extra=" + "z" * 100_000
    if "authorization" in headers:
        headers["authorization"] = authorization
    return list(headers.items()), _still_verifies(headers, key, date, bytes.fromhex(good))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rpc=st.sampled_from(sorted(_KINDS)), mangled=_mangled_headers())
async def test_a_mangled_known_key_header_is_refused_on_every_kind_of_call(
    rpc: str, mangled: tuple[list[tuple[str, str]], bool]
) -> None:
    metadata, unchanged = mangled
    SEEN.clear()
    answers = await _answers(rpc, metadata)
    statuses = [a.status for a in answers if a.HasField("status")]
    if unchanged:
        assert [s.code for s in statuses] == [pb.Code.OK], statuses
        return
    assert [s.code for s in statuses] == [pb.Code.UNAUTHORIZED], statuses
    assert statuses[0].message and len(statuses[0].message) <= 600
    assert not any(secret in statuses[0].message for secret in SECRETS)
    assert SEEN == []


# -- a policy file rewritten while in force --------------------------------------------------

_YAML = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=16),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["accounts", "accessKey", "secretKey", "admin", "topicPerms"])
            | st.text(max_size=8),
            inner,
            max_size=4,
        )
    ),
    max_leaves=16,
)
_GOOD = f"accounts:\n  - {{accessKey: {FILE_KEY}, secretKey: {FILE_SECRET}}}\n"


_WITH_SECRET = st.dictionaries(
    st.sampled_from(["accessKey", "admin", "topicPerms", "defaultTopicPerm"]), _YAML, max_size=3
).map(lambda extra: {"accounts": [{"secretKey": FILE_SECRET, **extra}]})
"""An account holding the secret, its other fields anything: a refusal must not show it."""


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    content=st.one_of(
        _YAML.map(lambda data: yaml.safe_dump(data).encode()),
        _WITH_SECRET.map(lambda data: yaml.safe_dump(data).encode()),
        st.binary(max_size=200),
        st.just(b"accounts: [" * 2_000),
    )
)
def test_a_policy_file_rewritten_with_anything_keeps_a_usable_policy(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path_factory.mktemp("acl") / "plain_acl.yml"
    path.write_text(_GOOD, encoding="utf-8")
    clock = ManualClock()
    policy_file = PolicyFile(path, clock, interval_s=1.0)
    before = policy_file.policy
    path.write_bytes(content)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    clock.advance(1.0)
    with caplog.at_level(logging.ERROR, logger="tidemq.acl"):
        caplog.clear()
        changed = policy_file.poll()
    if not changed:
        assert policy_file.policy is before
    assert all(FILE_SECRET not in r.getMessage() for r in caplog.records)
    unsigned = RemotingCommand.request(int(RequestCode.SEND_MESSAGE), {"topic": "T"})
    refusal = AclGate(policy_file.policy).check(unsigned, "127.0.0.1")
    assert refusal is not None and refusal.code == ResponseCode.NO_PERMISSION


# -- the users file and the admin codes ---------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "users",
                    "acls",
                    "username",
                    "password",
                    "userType",
                    "userStatus",
                    "subject",
                    "policies",
                    "policyType",
                    "entries",
                    "resource",
                    "actions",
                    "sourceIps",
                    "decision",
                ]
            )
            | st.text(max_size=6),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=_JSON)
def test_a_users_file_of_any_json_loads_or_is_refused_naming_it(
    tmp_path_factory: pytest.TempPathFactory, document: object
) -> None:
    path = tmp_path_factory.mktemp("auth") / "auth.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    try:
        store = AuthStore(path)
    except AuthModelError as exc:
        assert str(path) in str(exc)
    else:
        assert isinstance(store.state, AuthState)


_ADMIN_CODES = st.sampled_from([int(c) for c in RequestCode if 3001 <= c <= 3010])
_OUTCOMES = {
    ResponseCode.SUCCESS,
    ResponseCode.NO_PERMISSION,
    ResponseCode.INVALID_PARAMETER,
    ResponseCode.SYSTEM_ERROR,
}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    code=_ADMIN_CODES,
    header=st.dictionaries(
        st.sampled_from(["username", "subject", "resource", "filter", "AccessKey"]),
        st.text(max_size=20),
        max_size=4,
    ),
    body=st.one_of(_JSON.map(lambda d: json.dumps(d).encode()), st.binary(max_size=60)),
)
def test_the_admin_codes_answer_any_header_and_body_with_a_code(
    tmp_path_factory: pytest.TempPathFactory, code: int, header: dict[str, str], body: bytes
) -> None:
    store = AuthStore(tmp_path_factory.mktemp("admin") / "auth.json")
    store.create_user(User("root", "rootSecret01", UserType.SUPER))
    store.create_user(User(USER_KEY, USER_SECRET))
    before = store.state
    handler = AuthAdmin(store, lambda key: key == "root").handlers()[code]
    request = RemotingCommand.request(code, header, body)
    response = asyncio.run(handler(request, None))  # type: ignore[arg-type]
    assert response is not None and response.code in _OUTCOMES, response
    assert USER_SECRET.encode() not in response.body and "rootSecret01" not in (
        response.remark or ""
    )
    if response.code != ResponseCode.SUCCESS:
        assert response.remark and store.state == before
