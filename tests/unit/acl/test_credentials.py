"""Client credentials: AclClientRPCHook's signing, without changing the caller's fields."""

from __future__ import annotations

import pytest

from tidemq.acl.credentials import Credentials
from tidemq.acl.signing import verify
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand


def test_sign_adds_the_fields_and_leaves_the_callers_mapping_alone() -> None:
    fields = {"topic": "T", "queueId": "1"}
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"body")
    shared = request.ext_fields
    Credentials("accessKey1", "secretKey1", "token").sign(request)
    assert shared == {"topic": "T", "queueId": "1"}
    assert request.ext_fields["AccessKey"] == "accessKey1"
    assert request.ext_fields["SecurityToken"] == "token"
    assert verify(request.ext_fields, request.body, "secretKey1")
    assert not verify(request.ext_fields, request.body, "secretKey2")


def test_the_secret_is_not_in_the_repr() -> None:
    text = repr(Credentials("accessKey1", "secretKey1", "tok123"))
    assert "accessKey1" in text and "secretKey1" not in text and "tok123" not in text


def test_from_env_needs_both_or_neither() -> None:
    assert Credentials.from_env({}) is None
    creds = Credentials.from_env({"TIDEMQ_ACCESS_KEY": "ak", "TIDEMQ_SECRET_KEY": "sk"})
    assert creds == Credentials("ak", "sk")
    with pytest.raises(ValueError, match="set both"):
        Credentials.from_env({"TIDEMQ_ACCESS_KEY": "ak"})
    with pytest.raises(ValueError, match="both an access key and a secret key"):
        Credentials("ak", "")
