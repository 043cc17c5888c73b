"""ACL 1.0 on gRPC calls: RocketMQ's order (white addresses, key, signature), the
clock-skew window on an injected clock, the time-zone remark, and per-request grants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidemq.acl.gate import AclGate
from tidemq.acl.grpc_auth import client_headers, utc_offset_hint
from tidemq.acl.grpc_validator import GrpcCaller, authenticate, authorize
from tidemq.acl.permissions import Permission
from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.validator import AclPolicy, Denial, Reason
from tidemq.common.clock import ManualClock

POLICY_TEXT = """\
globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: appKey0001
    secretKey: appSecret0001
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB|SUB, Audit=SUB]
    groupPerms: [Billing=SUB]
  - accessKey: whiteKey01
    secretKey: whiteSecret01
    whiteRemoteAddress: 10.1.1.1
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
"""
POLICY = AclPolicy(parse_plain_acl(POLICY_TEXT))
CLOCK = ManualClock()
SKEW_MS = 900_000
HOST = "127.0.0.1"


def now() -> datetime:
    return datetime.fromtimestamp(CLOCK.now_ms() / 1000, UTC)


def signed(ak: str, sk: str, at: datetime | None = None) -> dict[str, str]:
    return client_headers(ak, sk, at or now())


def auth(metadata: dict[str, str], host: str = HOST, skew_ms: int = SKEW_MS) -> object:
    return authenticate(POLICY, metadata, host, CLOCK.now_ms(), skew_ms)


def reason(outcome: object) -> Reason:
    assert isinstance(outcome, Denial), outcome
    return outcome.reason


def test_a_signed_call_is_its_account() -> None:
    assert auth(signed("appKey0001", "appSecret0001")) == GrpcCaller(HOST, "appKey0001")


@pytest.mark.parametrize(
    ("metadata", "expected", "remark"),
    [
        ({}, Reason.NO_ACCESS_KEY, "No accessKey is configured"),
        (signed("", "x") | {}, Reason.NO_ACCESS_KEY, "No accessKey is configured"),
        (
            {"authorization": "Bearer abc", "x-mq-date-time": "x"},
            Reason.BAD_AUTHORIZATION,
            "scheme",
        ),
        (
            signed("nobody0001", "whatever"),
            Reason.UNKNOWN_ACCESS_KEY,
            "No acl config for nobody0001",
        ),
        (
            signed("appKey0001", "not-the-secret"),
            Reason.BAD_SIGNATURE,
            "Check signature failed for accessKey=appKey0001",
        ),
    ],
)
def test_refusals_in_rocketmq_order_with_its_texts(
    metadata: dict[str, str], expected: Reason, remark: str
) -> None:
    outcome = auth(metadata)
    assert reason(outcome) is expected
    assert isinstance(outcome, Denial) and remark in outcome.remark
    assert "appSecret0001" not in outcome.remark


def test_the_python_clients_anonymous_header_is_no_access_key() -> None:
    """rocketmq-python-client with Credentials() signs with an empty key."""
    anonymous = signed("x", "")
    anonymous["authorization"] = anonymous["authorization"].replace("Credential=x", "Credential=")
    assert reason(auth(anonymous)) is Reason.NO_ACCESS_KEY


def test_the_skew_window_on_the_injected_clock() -> None:
    clock = ManualClock()
    headers = client_headers(
        "appKey0001", "appSecret0001", datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
    )

    def at_clock() -> object:
        return authenticate(POLICY, headers, HOST, clock.now_ms(), SKEW_MS)

    assert at_clock() == GrpcCaller(HOST, "appKey0001")
    clock.advance(SKEW_MS / 1000)  # exactly the window: still good
    assert at_clock() == GrpcCaller(HOST, "appKey0001")
    clock.advance(1)
    assert reason(at_clock()) is Reason.CLOCK_SKEW
    early = now() + timedelta(milliseconds=SKEW_MS + 1000)  # a client clock ahead
    assert reason(auth(signed("appKey0001", "appSecret0001", early))) is Reason.CLOCK_SKEW
    assert auth(signed("appKey0001", "appSecret0001"), skew_ms=0) == GrpcCaller(HOST, "appKey0001")


def test_a_whole_hours_skew_is_explained_as_local_time_sent_as_utc() -> None:
    local = now() + timedelta(hours=8)  # the Python client at UTC+08:00
    outcome = auth(signed("appKey0001", "appSecret0001", local))
    assert reason(outcome) is Reason.CLOCK_SKEW
    assert isinstance(outcome, Denial)
    assert "UTC+08:00" in outcome.remark and "TZ=UTC" in outcome.remark
    odd = now() + timedelta(hours=8, minutes=7)
    plain = auth(signed("appKey0001", "appSecret0001", odd))
    assert isinstance(plain, Denial) and "TZ=UTC" not in plain.remark


@pytest.mark.parametrize(
    ("ahead_ms", "zone"),
    [
        (8 * 3_600_000, "UTC+08:00"),
        (-5 * 3_600_000 + 20_000, "UTC-05:00"),
        (5 * 3_600_000 + 45 * 60_000, "UTC+05:45"),
        (14 * 3_600_000, "UTC+14:00"),
    ],
)
def test_utc_offset_hint_names_the_zone(ahead_ms: int, zone: str) -> None:
    assert zone in utc_offset_hint(ahead_ms)


@pytest.mark.parametrize("ahead_ms", [0, 20 * 60_000, 3_600_000 + 5 * 60_000, 15 * 3_600_000])
def test_utc_offset_hint_is_silent_otherwise(ahead_ms: int) -> None:
    assert utc_offset_hint(ahead_ms) == ""


def test_white_addresses_skip_the_signature_as_on_the_remoting_port() -> None:
    assert auth({}, host="10.9.9.7") == GrpcCaller("10.9.9.7", None)
    wrong = signed("whiteKey01", "not-the-secret")
    assert auth(wrong, host="10.1.1.1") == GrpcCaller("10.1.1.1", "whiteKey01")
    assert reason(auth(wrong, host="10.1.1.2")) is Reason.BAD_SIGNATURE


def test_authorize_uses_topic_and_group_perms() -> None:
    app = GrpcCaller(HOST, "appKey0001")
    assert authorize(POLICY, app, [("Orders", Permission.PUB)]) is None
    assert (
        authorize(POLICY, app, [("%RETRY%Billing", Permission.SUB), ("Orders", Permission.SUB)])
        is None
    )
    assert authorize(POLICY, app, [("Audit", Permission.ANY)]) is None
    denied = authorize(POLICY, app, [("Audit", Permission.PUB)])
    assert denied == Denial(Reason.NO_PERMISSION, "No default permission for topic:Audit")
    denied = authorize(POLICY, app, [("%RETRY%Other", Permission.SUB)])
    assert denied == Denial(Reason.NO_PERMISSION, "No default permission for group:Other")
    admin = GrpcCaller(HOST, "adminKey01")
    assert authorize(POLICY, admin, [("Anything", Permission.PUB)]) is None
    assert authorize(POLICY, GrpcCaller("10.9.9.1", None), [("Audit", Permission.PUB)]) is None


def test_authorize_follows_the_policy_in_force() -> None:
    app = GrpcCaller(HOST, "appKey0001")
    shrunk = AclPolicy(
        parse_plain_acl("accounts:\n  - {accessKey: otherKey01, secretKey: otherSecret1}\n")
    )
    assert reason(authorize(shrunk, app, [])) is Reason.UNKNOWN_ACCESS_KEY
    assert reason(authorize(shrunk, GrpcCaller("10.9.9.1", None), [])) is Reason.NO_ACCESS_KEY


def test_the_gate_counts_grpc_refusals_with_the_remoting_ones() -> None:
    gate = AclGate(POLICY, name="broker-x")
    outcome = gate.grpc_authenticate("QueryRoute", {}, "::ffff:127.0.0.1", CLOCK.now_ms(), SKEW_MS)
    assert reason(outcome) is Reason.NO_ACCESS_KEY
    caller = GrpcCaller(HOST, "appKey0001")
    assert reason(
        gate.grpc_authorize("SendMessage", caller, lambda: [("Audit", Permission.PUB)])
    ) is (Reason.NO_PERMISSION)

    def unreadable() -> list[tuple[str, Permission]]:
        raise ValueError("Consumer heartbeat doesn't have group")

    assert reason(gate.grpc_authorize("Heartbeat", caller, unreadable)) is Reason.BAD_REQUEST
    counts = gate.refusals()
    assert (counts["no_access_key"], counts["no_permission"], counts["bad_request"]) == (1, 1, 1)
    assert counts["clock_skew"] == counts["bad_authorization"] == 0
