"""ACL 1.0 request signing: the bytes signed, the signature, and verification."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

from hypothesis import given
from hypothesis import strategies as st

from tidemq.acl.signing import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    request_content,
    sign_fields,
    signature,
    verify,
)

keys = st.text(min_size=1, max_size=12).filter(
    lambda k: k not in (SIGNATURE, ACCESS_KEY, SECURITY_TOKEN)
)
fields_st = st.dictionaries(keys, st.text(max_size=20), max_size=6)
bodies = st.one_of(st.none(), st.binary(max_size=64))


def test_content_is_sorted_values_then_body_without_signature() -> None:
    fields = {"b": "2", "a": "1", SIGNATURE: "zzz", "C": "3"}
    # Java String order: "C" (0x43) < "a" < "b"
    assert request_content(fields, b"BODY") == b"312BODY"


def test_content_null_value_and_missing_body_follow_java() -> None:
    assert request_content({"k": None, "j": "x"}, None) == b"xnull"
    assert request_content({"k": "v"}, b"") == b"v"


def test_content_uses_java_utf16_order_and_utf8() -> None:
    # U+FFFF sorts after U+10000 in Java (surrogate 0xD800 < 0xFFFF), the
    # other way round in Python's code point order.
    fields = {"\uffff": "A", "\U00010000": "B", "k": "é"}
    assert request_content(fields, None) == "éBA".encode()


def test_unique_key_query_skipped_only_for_old_versions() -> None:
    fields = {"a": "1", UNIQUE_MSG_QUERY_FLAG: "true"}
    assert request_content(fields, None) == b"true1"  # "_" < "a"
    assert request_content(fields, None, request_version=399) == b"1"
    assert request_content(fields, None, request_version=400) == b"true1"


def test_signature_pinned_against_independent_hmac() -> None:
    fields = {"topic": "TopicTest", "a": "group1", "queueId": "3"}
    signed = sign_fields(fields, b"hello", "rocketmq2", "12345678")
    # Sorted keys: AccessKey, a, queueId, topic -> values, then body.
    content = b"rocketmq2" + b"group1" + b"3" + b"TopicTest" + b"hello"
    expected = base64.b64encode(hmac.new(b"12345678", content, hashlib.sha1).digest()).decode()
    assert signed[SIGNATURE] == expected == "irCNEE3DjAj90y2hDvfq+ot9Dxk="
    assert signature("12345678", content) == expected
    assert SECURITY_TOKEN not in signed
    assert fields == {"topic": "TopicTest", "a": "group1", "queueId": "3"}


def test_security_token_is_added_and_signed() -> None:
    signed = sign_fields({"x": "1"}, None, "ak", "sk", security_token="tok")
    assert signed[SECURITY_TOKEN] == "tok"
    assert signed[SIGNATURE] == signature("sk", b"aktok1")
    tampered = dict(signed, SecurityToken="other")
    assert not verify(tampered, None, "sk")


def test_missing_signature_fails() -> None:
    assert not verify({"a": "1"}, None, "sk")


@given(fields_st, bodies, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10))
def test_sign_then_verify(fields: dict[str, str], body: bytes | None, ak: str, sk: str) -> None:
    signed = sign_fields(fields, body, ak, sk)
    assert verify(signed, body, sk)
    assert signed[ACCESS_KEY] == ak


@given(fields_st, bodies, st.randoms(use_true_random=False))
def test_field_order_never_matters(
    fields: dict[str, str], body: bytes | None, rnd: random.Random
) -> None:
    signed = sign_fields(fields, body, "ak", "sk")
    items = list(signed.items())
    rnd.shuffle(items)
    assert verify(dict(items), body, "sk")
    assert request_content(dict(items), body) == request_content(signed, body)


@given(fields_st.filter(bool), bodies, st.data())
def test_changing_a_value_breaks_it(
    fields: dict[str, str], body: bytes | None, data: st.DataObject
) -> None:
    signed = sign_fields(fields, body, "ak", "sk")
    key = data.draw(st.sampled_from(sorted(fields)))
    suffix = data.draw(st.text(min_size=1, max_size=5))
    tampered = dict(signed)
    tampered[key] = fields[key] + suffix  # longer content: always a different message
    assert not verify(tampered, body, "sk")


def test_only_the_concatenation_is_signed() -> None:
    # A property of the Java contract, pinned so nobody "fixes" it one-sidedly:
    # moving text between adjacent values keeps the signature.
    signed = sign_fields({"a": "xy", "b": "z"}, None, "ak", "sk")
    assert verify(dict(signed, a="x", b="yz"), None, "sk")


@given(fields_st, bodies, st.text(min_size=1, max_size=10).filter(lambda v: v != "v"))
def test_adding_a_field_breaks_it(fields: dict[str, str], body: bytes | None, extra: str) -> None:
    signed = sign_fields(fields, body, "ak", "sk")
    key = "zz-extra"
    tampered = dict(signed)
    tampered[key] = extra + tampered.get(key, "")
    assert not verify(tampered, body, "sk")


@given(fields_st, bodies, st.binary(min_size=1, max_size=8))
def test_changing_the_body_breaks_it(
    fields: dict[str, str], body: bytes | None, extra: bytes
) -> None:
    signed = sign_fields(fields, body, "ak", "sk")
    assert not verify(signed, (body or b"") + extra, "sk")


@given(fields_st, bodies)
def test_wrong_secret_or_access_key_fails(fields: dict[str, str], body: bytes | None) -> None:
    signed = sign_fields(fields, body, "ak", "sk")
    assert not verify(signed, body, "sk2")
    assert not verify(dict(signed, AccessKey="ak2"), body, "sk")
