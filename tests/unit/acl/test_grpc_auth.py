"""The gRPC `authorization` header.

The official client's own output verifies; the rest is refused with the right reason.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.util import signature as official_signature

from tidemq.acl.grpc_auth import (
    MAX_AUTHORIZATION_LENGTH,
    AuthorizationHeader,
    GrpcAuthError,
    GrpcAuthReason,
    client_headers,
    format_date_time,
    parse_authorization,
    parse_date_time,
    sign,
    verify_grpc,
)

AK = "RocketMQ"
SK = "12345678"
FIXED = datetime(2026, 11, 25, 4, 31, 0)
FIXED_MS = int(FIXED.replace(tzinfo=UTC).timestamp()) * 1000
SECRETS = {AK: SK, "other": "87654321"}
WINDOW = 15 * 60 * 1000


def lookup(key: str) -> str | None:
    return SECRETS.get(key)


def official_metadata(
    monkeypatch: pytest.MonkeyPatch, ak: str = AK, sk: str = SK
) -> dict[str, str]:
    """What rocketmq-python-client 5.1.2 sends, its clock pinned to FIXED."""

    class PinnedDatetime(datetime):
        @classmethod
        def now(cls, tz: object = None) -> PinnedDatetime:
            return cls(FIXED.year, FIXED.month, FIXED.day, FIXED.hour, FIXED.minute, FIXED.second)

    monkeypatch.setattr(official_signature, "datetime", PinnedDatetime)
    config = ClientConfiguration("127.0.0.1:8081", Credentials(ak, sk))
    return dict(official_signature.Signature.metadata(config, "client-1"))


def reason_of(metadata: dict[str, str], now_ms: int = FIXED_MS) -> GrpcAuthReason:
    with pytest.raises(GrpcAuthError) as info:
        verify_grpc(metadata, lookup, now_ms, WINDOW)
    return info.value.reason


# --- the official client -------------------------------------------------------------


def test_official_client_header_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = official_metadata(monkeypatch)
    assert metadata["x-mq-date-time"] == "20261125T043100Z"
    assert verify_grpc(metadata, lookup, FIXED_MS, WINDOW) == AK


def test_client_headers_match_the_official_client(monkeypatch: pytest.MonkeyPatch) -> None:
    official = official_metadata(monkeypatch)
    ours = client_headers(AK, SK, FIXED)
    assert ours == {k: official[k] for k in ("x-mq-date-time", "authorization")}


def test_sign_matches_the_official_sign() -> None:
    assert sign(SK, "20240101T000000Z") == official_signature.Signature.sign(SK, "20240101T000000Z")


def test_client_headers_exact_text() -> None:
    headers = client_headers("ak", "sk", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert headers["x-mq-date-time"] == "20240102T030405Z"
    assert headers["authorization"] == (
        "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, "
        f"Signature={sign('sk', '20240102T030405Z')}"
    )


def test_aware_time_is_converted_to_utc() -> None:
    plus2 = datetime(2024, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_date_time(plus2) == "20240102T030405Z"


# --- parse_authorization --------------------------------------------------------------


def test_parse_official_form() -> None:
    text = client_headers(AK, SK, FIXED)["authorization"]
    header = parse_authorization(text)
    assert header == AuthorizationHeader(
        AK, ("x-mq-date-time",), bytes.fromhex(sign(SK, "20261125T043100Z"))
    )


def test_parse_credential_scope_and_uppercase_hex() -> None:
    # Java: Credential split on '/', first part is the user; Hex.decodeHex takes either case
    header = parse_authorization("MQv2-HMAC-SHA1 Credential=ak/2024/cn, Signature=ABCDEF")
    assert header.access_key == "ak"
    assert header.signed_headers == ()
    assert header.signature == b"\xab\xcd\xef"


def test_parse_ignores_unknown_items() -> None:
    header = parse_authorization("MQv2-HMAC-SHA1 Credential=ak, Extra=1, Signature=00")
    assert header.access_key == "ak"


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("", "expected"),
        ("MQv2-HMAC-SHA1", "expected"),
        ("Bearer Credential=ak, Signature=00", "scheme"),
        ("mqv2-hmac-sha1 Credential=ak, Signature=00", "scheme"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature", "not name=value"),
        ("MQv2-HMAC-SHA1 Credential=ak,, Signature=00", "not name=value"),
        ("MQv2-HMAC-SHA1 Signature=00", "no Credential"),
        ("MQv2-HMAC-SHA1 Credential=ak", "no Signature"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=", "empty Signature"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=abc", "not hex"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=zz", "not hex"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=é0", "not hex"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=" + "0" * MAX_AUTHORIZATION_LENGTH, "longer"),
    ],
)
def test_parse_malformed(text: str, detail: str) -> None:
    with pytest.raises(GrpcAuthError) as info:
        parse_authorization(text)
    assert info.value.reason is GrpcAuthReason.MALFORMED
    assert detail in str(info.value)


@pytest.mark.parametrize(
    "text",
    ["MQv2-HMAC-SHA1 Credential=, Signature=00", "MQv2-HMAC-SHA1 Credential=/x, Signature=00"],
)
def test_an_empty_credential_is_no_credential(text: str) -> None:
    """What rocketmq-python-client sends with an empty Credentials(): an anonymous client."""
    with pytest.raises(GrpcAuthError) as info:
        parse_authorization(text)
    assert info.value.reason is GrpcAuthReason.NO_CREDENTIAL
    assert "empty Credential" in str(info.value)


@given(st.text(max_size=300))
def test_parse_never_crashes(text: str) -> None:
    try:
        header = parse_authorization(text)
    except GrpcAuthError as e:
        assert e.reason in (GrpcAuthReason.MALFORMED, GrpcAuthReason.NO_CREDENTIAL)
    else:
        assert header.access_key
        assert header.signature


# --- verify_grpc ----------------------------------------------------------------------


def test_wrong_secret_is_a_bad_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    assert reason_of(official_metadata(monkeypatch, sk="not-the-secret")) is (
        GrpcAuthReason.BAD_SIGNATURE
    )


def test_unknown_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert reason_of(official_metadata(monkeypatch, ak="nobody")) is GrpcAuthReason.UNKNOWN_KEY


def test_other_users_signature_refused() -> None:
    metadata = client_headers("other", SK, FIXED)  # the 'other' user, signed with AK's secret
    assert reason_of(metadata) is GrpcAuthReason.BAD_SIGNATURE


def test_tampered_date_refused() -> None:
    metadata = client_headers(AK, SK, FIXED)
    metadata["x-mq-date-time"] = "20261125T043101Z"
    assert reason_of(metadata) is GrpcAuthReason.BAD_SIGNATURE


def test_tampered_credential_refused() -> None:
    metadata = client_headers(AK, SK, FIXED)
    metadata["authorization"] = metadata["authorization"].replace(f"={AK},", "=other,")
    assert reason_of(metadata) is GrpcAuthReason.BAD_SIGNATURE


@pytest.mark.parametrize("position", [0, 7, 39])
def test_tampered_signature_refused(position: int) -> None:
    metadata = client_headers(AK, SK, FIXED)
    scheme, _, sig = metadata["authorization"].rpartition("Signature=")
    flipped = sig[:position] + ("1" if sig[position] != "1" else "2") + sig[position + 1 :]
    metadata["authorization"] = scheme + "Signature=" + flipped
    assert reason_of(metadata) is GrpcAuthReason.BAD_SIGNATURE


def test_truncated_signature_refused() -> None:
    metadata = client_headers(AK, SK, FIXED)
    metadata["authorization"] = metadata["authorization"][:-2]
    assert reason_of(metadata) is GrpcAuthReason.BAD_SIGNATURE


@pytest.mark.parametrize("offset_ms", [0, WINDOW, -WINDOW, WINDOW - 1, -(WINDOW - 1)])
def test_skew_within_window_accepted(offset_ms: int) -> None:
    metadata = client_headers(AK, SK, FIXED)
    assert verify_grpc(metadata, lookup, FIXED_MS + offset_ms, WINDOW) == AK


@pytest.mark.parametrize("offset_ms", [WINDOW + 1, -(WINDOW + 1), 10 * WINDOW])
def test_skew_past_window_refused(offset_ms: int) -> None:
    metadata = client_headers(AK, SK, FIXED)
    with pytest.raises(GrpcAuthError) as info:
        verify_grpc(metadata, lookup, FIXED_MS + offset_ms, WINDOW)
    assert info.value.reason is GrpcAuthReason.CLOCK_SKEW
    assert f"off by {abs(offset_ms)} ms" in str(info.value)


def test_zero_window_needs_the_exact_second() -> None:
    metadata = client_headers(AK, SK, FIXED)
    assert verify_grpc(metadata, lookup, FIXED_MS, 0) == AK
    with pytest.raises(GrpcAuthError):
        verify_grpc(metadata, lookup, FIXED_MS + 1, 0)


def test_negative_window_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="max_skew_ms"):
        verify_grpc(client_headers(AK, SK, FIXED), lookup, FIXED_MS, -1)


def test_missing_authorization() -> None:
    metadata = client_headers(AK, SK, FIXED)
    del metadata["authorization"]
    assert reason_of(metadata) is GrpcAuthReason.MISSING_AUTHORIZATION
    assert reason_of({}) is GrpcAuthReason.MISSING_AUTHORIZATION


@pytest.mark.parametrize("value", [None, ""])
def test_missing_date(value: str | None) -> None:
    metadata = client_headers(AK, SK, FIXED)
    if value is None:
        del metadata["x-mq-date-time"]
    else:
        metadata["x-mq-date-time"] = value
    assert reason_of(metadata) is GrpcAuthReason.MISSING_DATE


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-25T04:31:00Z",
        "20261125T043100",
        "20261125 043100Z",
        "20261325T043100Z",  # month 13
        "20260230T043100Z",  # 30 February
        "20261125T253100Z",
        "2026112T0431000Z",
        "\uff11" * 8 + "T043100Z",  # non-ASCII (fullwidth) digits
    ],
)
def test_malformed_date(value: str) -> None:
    metadata = client_headers(AK, SK, FIXED)
    metadata["x-mq-date-time"] = value
    assert reason_of(metadata) is GrpcAuthReason.BAD_DATE


def test_malformed_header_in_verify() -> None:
    metadata = client_headers(AK, SK, FIXED)
    metadata["authorization"] = "MQv2-HMAC-SHA1 Credential=RocketMQ"
    assert reason_of(metadata) is GrpcAuthReason.MALFORMED


def test_metadata_keys_are_case_insensitive() -> None:
    metadata = {k.upper(): v for k, v in client_headers(AK, SK, FIXED).items()}
    assert verify_grpc(metadata, lookup, FIXED_MS, WINDOW) == AK


def test_error_messages_carry_no_secret() -> None:
    metadata = client_headers(AK, "wrong-secret", FIXED)
    with pytest.raises(GrpcAuthError) as info:
        verify_grpc(metadata, lookup, FIXED_MS, WINDOW)
    text = str(info.value)
    assert SK not in text
    assert "wrong-secret" not in text
    assert sign("wrong-secret", "20261125T043100Z") not in text


def test_error_is_a_value_error() -> None:
    assert issubclass(GrpcAuthError, ValueError)


# --- properties -----------------------------------------------------------------------

_keys = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=",/="),
    min_size=1,
    max_size=40,
)
_times = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9999, 1, 1))


@given(ak=_keys, sk=st.text(min_size=1, max_size=64), when=_times)
def test_round_trip(ak: str, sk: str, when: datetime) -> None:
    metadata = client_headers(ak, sk, when)
    # whole seconds first: float timestamp() of 3059-01-01 00:00:00.999997 rounds up
    now_ms = int(when.replace(tzinfo=UTC, microsecond=0).timestamp()) * 1000
    assert verify_grpc(metadata, {ak: sk}.get, now_ms, 0) == ak
    assert parse_date_time(metadata["x-mq-date-time"]) == now_ms


@given(ak=_keys, sk=st.text(min_size=1, max_size=64), other=st.text(min_size=1, max_size=64))
def test_any_other_secret_is_refused(ak: str, sk: str, other: str) -> None:
    if other == sk:
        return
    metadata = client_headers(ak, other, FIXED)
    with pytest.raises(GrpcAuthError) as info:
        verify_grpc(metadata, {ak: sk}.get, FIXED_MS, WINDOW)
    assert info.value.reason is GrpcAuthReason.BAD_SIGNATURE


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=200), max_size=4))
def test_verify_never_crashes(metadata: dict[str, str]) -> None:
    with contextlib.suppress(GrpcAuthError):
        verify_grpc(metadata, lookup, FIXED_MS, WINDOW)
