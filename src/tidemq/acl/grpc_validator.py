"""ACL 1.0 on a gRPC call: who is calling (once per call), may it do this (per request).

The same policy and rules as the remoting port (``validator``), in RocketMQ's
order (rocketmq-all-5.2.0 ``acl/.../plain/PlainPermissionManager.java``
validate, which the 5.2.0 proxy applies to every gRPC request through
``proxy/.../grpc/interceptor/AuthenticationInterceptor.java``):

1. a client in ``globalWhiteRemoteAddresses`` is admitted, with or without
   credentials;
2. the ``authorization`` header must name an access key ("No accessKey is
   configured") the policy knows ("No acl config for KEY");
3. a client matching its account's ``whiteRemoteAddress`` is admitted
   without a signature check (nor a permission check);
4. the signature over ``x-mq-date-time`` must be the secret key's ("Check
   signature failed for accessKey=KEY"), and the date within the clock-skew
   window (tidemq's addition: RocketMQ checks no time, so a captured header
   would be good forever);
5. every resource the request names needs its permission
   (``validator.check_perms``).

Steps 1-4 are ``authenticate``, step 5 with the white addresses again is
``authorize``. A call's metadata is sent once, at its start; a Telemetry
stream's commands are each authenticated again with it (RocketMQ 5.3's proxy
runs its whole pipeline, authentication and authorization, on every message
of the stream: rocketmq-all-5.3.3 ``proxy/.../grpc/v2/
GrpcMessagingApplication.java`` telemetry -> onNext -> addExecutor ->
requestPipeline.execute, with the default StatelessAuthenticationStrategy),
so a user deleted or disabled, or a password changed, refuses the stream's
next command; the clock window is checked at the start only (RocketMQ checks
none), so a stream that lives for hours is not refused for its old date.
Each request is authorized against the policy in force then, so a policy
change applies to an open stream's next command too.

A key the file does not know may be a RocketMQ 5 user (``AclPolicy.user``):
its password verifies the signature, a disabled user is refused, and each
request is judged by its ACL (``auth_check.authorize_user``), as on the
remoting port.

Differences from 5.2.0, on purpose: Java parses the header before the
address rules, so a client without credentials is refused even from a
globally white address (a NullPointerException, answered INTERNAL); tidemq
admits it, as the remoting port does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .auth_check import authorize_user
from .grpc_auth import (
    AUTHORIZATION,
    GrpcAuthError,
    GrpcAuthReason,
    parse_authorization,
    verify_grpc,
)
from .permissions import Permission
from .validator import AclPolicy, Denial, Reason, check_perms, shown_key, user_disabled

__all__ = ["GrpcCaller", "authenticate", "authorize"]

_NO_CREDENTIALS = "No accessKey is configured (the client sends no credentials)"

_REASONS: dict[GrpcAuthReason, Reason] = {
    GrpcAuthReason.MISSING_AUTHORIZATION: Reason.NO_ACCESS_KEY,
    GrpcAuthReason.NO_CREDENTIAL: Reason.NO_ACCESS_KEY,
    GrpcAuthReason.MALFORMED: Reason.BAD_AUTHORIZATION,
    GrpcAuthReason.MISSING_DATE: Reason.BAD_AUTHORIZATION,
    GrpcAuthReason.BAD_DATE: Reason.BAD_AUTHORIZATION,
    GrpcAuthReason.CLOCK_SKEW: Reason.CLOCK_SKEW,
    GrpcAuthReason.UNKNOWN_KEY: Reason.UNKNOWN_ACCESS_KEY,
    GrpcAuthReason.BAD_SIGNATURE: Reason.BAD_SIGNATURE,
}


@dataclass(frozen=True, slots=True)
class GrpcCaller:
    """An authenticated call: from `host`, as `access_key` (None: admitted
    anonymously by a global white address)."""

    host: str
    access_key: str | None


def _denial(error: GrpcAuthError, access_key: str | None) -> Denial:
    reason = _REASONS[error.reason]
    if reason is Reason.NO_ACCESS_KEY:
        return Denial(reason, _NO_CREDENTIALS)
    if reason is Reason.BAD_SIGNATURE and access_key is not None:
        return Denial(reason, f"Check signature failed for accessKey={shown_key(access_key)}")
    return Denial(reason, str(error))


def authenticate(
    policy: AclPolicy,
    metadata: Mapping[str, str],
    host: str,
    now_ms: int,
    max_skew_ms: int | None,
) -> GrpcCaller | Denial:
    """Steps 1-4 for a call's `metadata` (lower-case keys) from `host` (``client_host``);
    `max_skew_ms` None: no clock window (the headers of a stream checked when it began)."""
    if policy.globally_white(host):
        return GrpcCaller(host, None)
    text = metadata.get(AUTHORIZATION)
    if not text:
        return Denial(Reason.NO_ACCESS_KEY, _NO_CREDENTIALS)
    try:
        access_key = parse_authorization(text).access_key
    except GrpcAuthError as error:
        return _denial(error, None)
    owned = policy.account(access_key)
    user = policy.user(access_key) if owned is None else None
    if owned is not None and owned.addresses.matches(host):
        return GrpcCaller(host, access_key)
    if owned is not None:
        secret = owned.account.secret_key
    elif user is not None:
        if not user.enabled:
            return user_disabled(user)
        secret = user.password
    else:
        return Denial(Reason.UNKNOWN_ACCESS_KEY, f"No acl config for {shown_key(access_key)}")
    try:
        verify_grpc(metadata, lambda _key: secret, now_ms, max_skew_ms)
    except GrpcAuthError as error:
        return _denial(error, access_key)
    return GrpcCaller(host, access_key)


def authorize(
    policy: AclPolicy, caller: GrpcCaller, needed: list[tuple[str, Permission]]
) -> Denial | None:
    """Step 5 (after the address rules, as the policy now says) for one request."""
    if policy.globally_white(caller.host):
        return None
    if caller.access_key is None:  # white when the call began, no longer
        return Denial(Reason.NO_ACCESS_KEY, _NO_CREDENTIALS)
    owned = policy.account(caller.access_key)
    user = policy.user(caller.access_key) if owned is None else None
    if user is not None:  # a RocketMQ 5 user, as it stands now
        if not user.enabled:
            return user_disabled(user)
        return authorize_user(policy.auth, user, needed, caller.host)
    if owned is None:  # removed since the call began
        return Denial(
            Reason.UNKNOWN_ACCESS_KEY, f"No acl config for {shown_key(caller.access_key)}"
        )
    if owned.addresses.matches(caller.host):
        return None
    return check_perms(needed, owned)
