"""The gate in front of a server's table: NO_PERMISSION, counters, one log per client and reason."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.acl.gate import AclGate
from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.signing import sign_fields
from tidemq.acl.validator import AclPolicy
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

POLICY = AclPolicy(
    parse_plain_acl(
        "accounts:\n  - {accessKey: pubKey01, secretKey: pubSecret01, topicPerms: [T=PUB]}\n"
    )
)


def send(topic: str, secret: str = "pubSecret01") -> RemotingCommand:
    fields = sign_fields({"b": topic}, b"x", "pubKey01", secret)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"x", opaque=7)


def test_an_admitted_request_goes_on() -> None:
    gate = AclGate(POLICY)
    assert gate.check(send("T"), "127.0.0.1") is None
    assert set(gate.refusals().values()) == {0}


def test_a_refusal_is_no_permission_with_the_remark_and_the_requests_opaque() -> None:
    response = AclGate(POLICY).check(send("T", "bad-secret"), "127.0.0.1")
    assert response is not None
    assert response.code == ResponseCode.NO_PERMISSION == 16
    assert response.remark == "Check signature failed for accessKey=pubKey01"
    assert response.opaque == 7


def test_refusals_are_counted_per_reason_and_logged_once_per_client_and_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = AclGate(POLICY, name="broker-x")
    with caplog.at_level(logging.WARNING, logger="tidemq.acl"):
        for _ in range(3):
            gate.check(send("T", "bad-secret"), "127.0.0.1")
        gate.check(send("T", "bad-secret"), "127.0.0.2")
        gate.check(send("Other"), "127.0.0.1")
    counts = gate.refusals()
    assert counts["bad_signature"] == 4
    assert counts["no_permission"] == 1
    assert counts["no_access_key"] == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert all("pubSecret01" not in line and "bad-secret" not in line for line in lines)
    signature = send("T", "bad-secret").ext_fields["Signature"]
    assert all(signature not in line for line in lines)
    assert "broker-x: refused SEND_MESSAGE_V2 from 127.0.0.1 (bad_signature)" in lines[0]


def test_a_new_policy_applies_to_the_next_request() -> None:
    gate = AclGate(POLICY)
    assert gate.check(send("Other"), "127.0.0.1") is not None
    gate.use(
        AclPolicy(
            parse_plain_acl(
                "accounts:\n"
                "  - {accessKey: pubKey01, secretKey: pubSecret01, defaultTopicPerm: PUB}\n"
            )
        )
    )
    assert gate.check(send("Other"), "127.0.0.1") is None


_text = st.text(max_size=80)
_fields = st.dictionaries(
    st.sampled_from(["AccessKey", "Signature", "SecurityToken", "b", "topic", "group"]) | _text,
    _text,
    max_size=8,
)
_codes = st.sampled_from([int(c) for c in RequestCode] + [-1, 0, 2**31 - 1])


@settings(max_examples=300, deadline=None)
@given(code=_codes, fields=_fields, body=st.binary(max_size=200), version=st.integers(-5, 500))
def test_any_request_gets_an_answer_or_goes_on_never_an_exception(
    code: int, fields: dict[str, str], body: bytes, version: int
) -> None:
    request = RemotingCommand(code=code, version=version, ext_fields=fields, body=body)
    response = AclGate(POLICY).check(request, "127.0.0.1")
    if response is not None:
        assert response.code == ResponseCode.NO_PERMISSION
        assert response.remark and "pubSecret01" not in response.remark
