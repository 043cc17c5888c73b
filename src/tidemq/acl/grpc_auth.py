"""The 5.x gRPC `authorization` metadata: parse, verify, and produce it.

The official clients send, on every call (rocketmq-python-client 5.1.2,
`rocketmq/v5/util/signature.py`, `Signature.metadata` / `Signature.sign`)::

    x-mq-date-time: 20261125T043100Z                      (strftime "%Y%m%dT%H%M%SZ")
    authorization:  MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>

where `<hex>` is the lowercase hex of HMAC-SHA1(secret key as UTF-8, the
`x-mq-date-time` value as UTF-8).

The server side follows apache/rocketmq
`auth/.../authentication/builder/DefaultAuthenticationContextBuilder.java`
(`build(Metadata, ...)`): the header is split once on a space (scheme, rest),
the rest on commas, each trimmed item once on `=`; `Credential` is split on
`/` and its first part is the user; `Signature` is hex-decoded (bad hex is an
error); the signed content is the `x-mq-date-time` value, which must be
present; `SignedHeaders` is split on `;` (rocketmq-all-5.2.0
`acl/.../common/AuthorizationHeader.java`, the same parser before RIP-77).
`DefaultAuthenticationHandler.doAuthenticate` then recomputes the
HMAC-SHA1 with the user's secret and compares in constant time. Metadata key
names come from `common/.../constant/GrpcConstants.java` (`AUTHORIZATION`,
`DATE_TIME`).

Differences from RocketMQ, on purpose: the scheme must be `MQv2-HMAC-SHA1`
(RocketMQ ignores it; every official client sends exactly this), `Credential`
and `Signature` must both appear, and the date must match
`yyyyMMdd'T'HHmmss'Z'` and lie within a clock-skew window of the server's
clock (issue #17; RocketMQ does not check the time at all).

Note: the official Python client formats `datetime.now()`, the *local* time,
with a `Z` suffix; on a host not running in UTC its dates are off by the
UTC offset, which the skew window sees.
"""

from __future__ import annotations

import binascii
import enum
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import NamedTuple

__all__ = [
    "AUTHORIZATION",
    "DATE_TIME",
    "DATE_TIME_FORMAT",
    "MAX_AUTHORIZATION_LENGTH",
    "SCHEME",
    "AuthorizationHeader",
    "GrpcAuthError",
    "GrpcAuthReason",
    "client_headers",
    "format_date_time",
    "parse_authorization",
    "parse_date_time",
    "sign",
    "utc_offset_hint",
    "verify_grpc",
]

#: metadata key names (GrpcConstants.AUTHORIZATION / GrpcConstants.DATE_TIME)
AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
#: the scheme the official clients send (signature.py: "MQv2-HMAC-SHA1")
SCHEME = "MQv2-HMAC-SHA1"
#: strftime form of Java's yyyyMMdd'T'HHmmss'Z' (signature.py: "%Y%m%dT%H%M%SZ")
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
#: a header longer than this is refused unread (fuzzing: huge fields)
MAX_AUTHORIZATION_LENGTH = 4096

_CREDENTIAL = "Credential"  # DefaultAuthenticationContextBuilder.CREDENTIAL
_SIGNATURE = "Signature"  # DefaultAuthenticationContextBuilder.SIGNATURE
_SIGNED_HEADERS = "SignedHeaders"
_DATE_RE = re.compile(r"\d{8}T\d{6}Z", re.ASCII)


class GrpcAuthReason(enum.Enum):
    """Why a gRPC request's credentials were refused."""

    MISSING_AUTHORIZATION = "missing authorization header"
    NO_CREDENTIAL = "no access key in the authorization header"
    MALFORMED = "malformed authorization header"
    MISSING_DATE = "missing x-mq-date-time header"
    BAD_DATE = "malformed x-mq-date-time header"
    CLOCK_SKEW = "x-mq-date-time outside the allowed clock skew"
    UNKNOWN_KEY = "unknown access key"
    BAD_SIGNATURE = "signature mismatch"


class GrpcAuthError(ValueError):
    """A refused `authorization` header; `reason` says why, the message says more.

    Messages never contain a secret or a full signature.
    """

    def __init__(self, reason: GrpcAuthReason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)


class AuthorizationHeader(NamedTuple):
    """The parts of an `authorization` value."""

    access_key: str
    #: names listed in SignedHeaders (split on ';'), empty when absent
    signed_headers: tuple[str, ...]
    #: the signature bytes (hex-decoded)
    signature: bytes


def _malformed(detail: str) -> GrpcAuthError:
    return GrpcAuthError(GrpcAuthReason.MALFORMED, detail)


def parse_authorization(text: str) -> AuthorizationHeader:
    """Split an `authorization` value into access key, signed headers, signature.

    Parsing follows DefaultAuthenticationContextBuilder.build(Metadata, ...);
    raises GrpcAuthError(MALFORMED) with the reason in its message, or
    NO_CREDENTIAL for an empty ``Credential=`` (a client without credentials).
    """
    if len(text) > MAX_AUTHORIZATION_LENGTH:
        raise _malformed(f"longer than {MAX_AUTHORIZATION_LENGTH} characters")
    scheme, sep, rest = text.partition(" ")
    if not sep:
        raise _malformed("expected '<scheme> Credential=..., Signature=...'")
    if scheme != SCHEME:
        raise _malformed(f"scheme must be {SCHEME!r}")
    access_key: str | None = None
    signed_headers: tuple[str, ...] = ()
    signature: bytes | None = None
    for item in rest.split(","):
        name, eq, value = item.strip().partition("=")
        if not eq:
            raise _malformed(f"item {name[:32]!r} is not name=value")
        if name == _CREDENTIAL:
            # Java: kv[1].split("/"), credential[0] is the user
            access_key = value.split("/", 1)[0]
            if not access_key:
                # what rocketmq-python-client sends with an empty Credentials()
                raise GrpcAuthError(GrpcAuthReason.NO_CREDENTIAL, "empty Credential")
        elif name == _SIGNED_HEADERS:
            signed_headers = tuple(h for h in value.split(";") if h)
        elif name == _SIGNATURE:
            try:
                signature = binascii.unhexlify(value)
            except (binascii.Error, ValueError):
                raise _malformed("Signature is not hex") from None
            if not signature:
                raise _malformed("empty Signature")
        # other names are ignored, as RocketMQ does
    if access_key is None:
        raise _malformed("no Credential")
    if signature is None:
        raise _malformed("no Signature")
    return AuthorizationHeader(access_key, signed_headers, signature)


def sign(secret_key: str, date_time: str) -> str:
    """Hex HMAC-SHA1 of the date-time value (signature.py `Signature.sign`)."""
    mac = hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1)
    return mac.hexdigest()


def format_date_time(now: datetime) -> str:
    """`now` as yyyyMMdd'T'HHmmss'Z'.

    An aware time is converted to UTC; a naive one is taken as UTC already.
    """
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.strftime(DATE_TIME_FORMAT)


def parse_date_time(text: str) -> int:
    """Milliseconds since the epoch of a yyyyMMdd'T'HHmmss'Z' value (UTC)."""
    if not _DATE_RE.fullmatch(text):
        raise GrpcAuthError(GrpcAuthReason.BAD_DATE, "expected yyyyMMdd'T'HHmmss'Z'")
    try:
        parsed = datetime.strptime(text, DATE_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise GrpcAuthError(GrpcAuthReason.BAD_DATE, "not a valid date and time") from None
    return int(parsed.timestamp()) * 1000


def client_headers(access_key: str, secret_key: str, now: datetime) -> dict[str, str]:
    """The two metadata entries the official client sends for credentials.

    Same text as rocketmq-python-client `Signature.metadata` (which also sends
    language, version, request id, client id and namespace entries; those do
    not take part in authentication).
    """
    date_time = format_date_time(now)
    authorization = (
        f"{SCHEME} {_CREDENTIAL}={access_key}, {_SIGNED_HEADERS}={DATE_TIME}, "
        f"{_SIGNATURE}={sign(secret_key, date_time)}"
    )
    return {DATE_TIME: date_time, AUTHORIZATION: authorization}


def verify_grpc(
    metadata: Mapping[str, str],
    secret_lookup: Callable[[str], str | None],
    now_ms: int,
    max_skew_ms: int | None,
) -> str:
    """Check a call's credentials; return the access key or raise GrpcAuthError.

    `secret_lookup(access_key)` gives the secret key, or None for an unknown
    key. The date must lie within `max_skew_ms` of `now_ms` either way (a
    difference of exactly `max_skew_ms` passes); None checks no window (the
    same headers again, later in a stream whose start was checked). Checks run
    in this order: authorization present, date present, header well formed,
    date well formed, key known, signature right, date within the window.
    """
    if max_skew_ms is not None and max_skew_ms < 0:
        raise ValueError("max_skew_ms must not be negative")
    lowered = {k.lower(): v for k, v in metadata.items()}
    authorization = lowered.get(AUTHORIZATION)
    if not authorization:
        raise GrpcAuthError(GrpcAuthReason.MISSING_AUTHORIZATION)
    date_time = lowered.get(DATE_TIME)
    if not date_time:
        # DefaultAuthenticationContextBuilder: "datetime is null."
        raise GrpcAuthError(GrpcAuthReason.MISSING_DATE)
    header = parse_authorization(authorization)
    date_ms = parse_date_time(date_time)
    secret = secret_lookup(header.access_key)
    if secret is None:
        # DefaultAuthenticationHandler: "User:{} is not found."
        raise GrpcAuthError(GrpcAuthReason.UNKNOWN_KEY, f"access key {header.access_key[:64]!r}")
    expected = hmac.new(secret.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).digest()
    if not hmac.compare_digest(expected, header.signature):
        # DefaultAuthenticationHandler: "check signature failed."
        raise GrpcAuthError(GrpcAuthReason.BAD_SIGNATURE, f"access key {header.access_key[:64]!r}")
    skew = abs(now_ms - date_ms)
    if max_skew_ms is not None and skew > max_skew_ms:
        detail = f"off by {skew} ms, allowed {max_skew_ms} ms"
        hint = utc_offset_hint(date_ms - now_ms)
        raise GrpcAuthError(GrpcAuthReason.CLOCK_SKEW, f"{detail}; {hint}" if hint else detail)
    return header.access_key


_QUARTER_HOUR_MS = 15 * 60_000
_OFFSET_SLACK_MS = 60_000
"""How far from a whole quarter hour a skew may be and still look like a time zone."""
_MAX_ZONE_MS = 14 * 3_600_000


def utc_offset_hint(ahead_ms: int) -> str:
    """Why a client's date may be `ahead_ms` off ('' when no reason is apparent).

    A skew of a whole number of hours (or quarter hours, as UTC+05:45 has),
    give or take a minute, is almost always a client that formats its local
    time with a 'Z' suffix, as rocketmq-python-client 5.x does with
    ``datetime.now()`` (``Signature.metadata``): the remark says so, so the
    user fixes the client's time zone instead of the server's clock."""
    zones = round(ahead_ms / _QUARTER_HOUR_MS)
    offset_ms = zones * _QUARTER_HOUR_MS
    if not 3_600_000 <= abs(offset_ms) <= _MAX_ZONE_MS:
        return ""
    if abs(ahead_ms - offset_ms) > _OFFSET_SLACK_MS:
        return ""
    hours, minutes = divmod(abs(offset_ms) // 60_000, 60)
    sign = "+" if offset_ms > 0 else "-"
    direction = "ahead of" if offset_ms > 0 else "behind"
    return (
        f"the client's x-mq-date-time is {hours} h {minutes:02d} min {direction} UTC: "
        f"it looks like local time (UTC{sign}{hours:02d}:{minutes:02d}) sent as UTC, which "
        "rocketmq-python-client does (it formats datetime.now() with a 'Z'); run the client "
        "with TZ=UTC"
    )
