"""Signing and verifying remoting requests: RocketMQ's ACL 1.0 wire contract.

A 4.x client with credentials (ali-ons, the Java client's AclClientRPCHook,
our own client) adds ``AccessKey`` (and ``SecurityToken`` if it has one) to
the request's ext fields, then a ``Signature``: Base64 of HMAC-SHA1, keyed
with the secret key, over the *values* of all other ext fields sorted by
name, followed by the body. The broker recomputes it from what it received.
Both sides must build the very same bytes, so this module copies Java's rules
byte for byte, including its quirks:

* ext fields are sorted as a Java ``TreeMap<String, String>`` sorts them
  (``String.compareTo``: UTF-16 code units, not code points);
* a null value is appended as the text ``"null"`` (``StringBuilder.append``);
* the text is encoded as UTF-8 (``SessionCredentials.CHARSET``), a lone
  surrogate becoming ``?`` as Java's encoder does;
* a missing body adds nothing (``AclUtils.combineBytes``).

Sources (apache/rocketmq, tag rocketmq-all-4.9.8 unless said otherwise):
``acl/.../common/AclUtils.java`` (combineRequestContent, combineBytes),
``acl/.../common/AclSigner.java`` (HmacSHA1, Base64, UTF-8 key),
``acl/.../common/AclClientRPCHook.java`` (doBeforeRequest),
``acl/.../common/SessionCredentials.java`` (field names, charset),
``acl/.../plain/PlainAccessResource.java`` at f75dc5a4d2^ (parse: the
broker's content skips ``_UNIQUE_KEY_QUERY`` for requests of version
<= V4_9_3).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"  # SessionCredentials.ACCESS_KEY
SECURITY_TOKEN = "SecurityToken"  # SessionCredentials.SECURITY_TOKEN
SIGNATURE = "Signature"  # SessionCredentials.SIGNATURE

# MixAll.UNIQUE_MSG_QUERY_FLAG; the broker leaves it out of the signed content
# when the request's version is <= MQVersion.Version.V4_9_3 (ordinal 399),
# because clients before 4.9.4 added it after signing.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
V4_9_3_ORDINAL = 399


def _java_string_order(key: str) -> bytes:
    """Sort key equal to Java's String.compareTo (UTF-16 code unit order)."""
    return key.encode("utf-16-be", errors="surrogatepass")


def _java_utf8(text: str) -> bytes:
    """String.getBytes(UTF_8): unpaired surrogates become '?'."""
    return text.encode("utf-8", errors="replace")


def request_content(
    ext_fields: Mapping[str, str | None],
    body: bytes | None,
    *,
    request_version: int | None = None,
) -> bytes:
    """The bytes a request's Signature covers (AclUtils.combineRequestContent).

    Values of every ext field except ``Signature``, in Java TreeMap order,
    concatenated and UTF-8 encoded, then the body. With ``request_version``
    given (the broker side), ``_UNIQUE_KEY_QUERY`` is skipped for versions
    <= V4_9_3 as PlainAccessResource.parse does."""
    skip_unique = request_version is not None and request_version <= V4_9_3_ORDINAL
    parts: list[str] = []
    for key in sorted(ext_fields, key=_java_string_order):
        if key == SIGNATURE or (skip_unique and key == UNIQUE_MSG_QUERY_FLAG):
            continue
        value = ext_fields[key]
        parts.append("null" if value is None else value)
    head = _java_utf8("".join(parts))
    return head + body if body else head


def signature(secret_key: str, content: bytes) -> str:
    """Base64 of HMAC-SHA1 of ``content`` keyed with the UTF-8 secret (AclSigner)."""
    digest = hmac.new(_java_utf8(secret_key), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_fields(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """The ext fields with what AclClientRPCHook.doBeforeRequest adds.

    ``AccessKey`` and, when given, ``SecurityToken`` are added first and so
    are signed too; then ``Signature``. The input mapping is not changed."""
    fields = dict(ext_fields)
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = signature(secret_key, request_content(fields, body))
    return fields


def verify(
    ext_fields: Mapping[str, str | None],
    body: bytes | None,
    secret_key: str,
    *,
    request_version: int | None = None,
) -> bool:
    """Whether the request's ``Signature`` is the one ``secret_key`` gives.

    False when the field is missing. The comparison is constant-time, as
    Java's since apache/rocketmq#8883 (MessageDigest.isEqual)."""
    claimed = ext_fields.get(SIGNATURE)
    if claimed is None:
        return False
    expected = signature(
        secret_key, request_content(ext_fields, body, request_version=request_version)
    )
    return hmac.compare_digest(_java_utf8(expected), _java_utf8(claimed))
