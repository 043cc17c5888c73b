"""What the broker's remoting processors share: the shape of a handler and of
a processor, reply helpers, and the commands the broker pushes to clients.

A processor (tidemq.broker.processors) answers a family of request codes;
`handlers()` names its handler of each code. The dispatch table
(tidemq.broker.handlers) is the union of those maps.

Pushed to clients (oneway, Java's Broker2Client): NOTIFY_CONSUMER_IDS_CHANGED
(40, extFields consumerGroup) to a consumer group's members when its
membership or subscriptions change, and RESET_CONSUMER_CLIENT_OFFSET (220) to
online members after a reset.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeAlias

from tidemq.broker.consumers import ClientChannel
from tidemq.protocol.admin_headers import ResetOffsetRequestHeader
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import encode_header
from tidemq.transport import Connection
from tidemq.transport.errors import RemotingError

__all__ = [
    "Processor",
    "RequestHandler",
    "born_address",
    "encode_json",
    "json_body",
    "notify_consumer_ids_changed",
    "ok",
    "push_reset_offset",
]

log = logging.getLogger(__name__)

RequestHandler: TypeAlias = Callable[
    [RemotingCommand, Connection], Awaitable[RemotingCommand | None]
]
"""One request code's handler: the request and its connection in, the
response out (None: no response, for a oneway request)."""


class Processor(Protocol):
    """A family of request codes and their handlers."""

    def handlers(self) -> dict[int, RequestHandler]:
        """Request code -> handler, written out (no names looked up)."""
        ...


def encode_json(document: object) -> bytes:
    """Compact standard JSON, the bodies' encoding."""
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def json_body(request: RemotingCommand, what: str) -> Any:
    """The request's JSON body (None when empty); ValueError naming `what` if malformed."""
    try:
        return json.loads(request.body.decode("utf-8")) if request.body else None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} body is not valid JSON: {exc}") from None


def ok(
    request: RemotingCommand, ext_fields: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    """SUCCESS with the given header fields and body."""
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext_fields, body)


@functools.lru_cache(maxsize=1024)
def born_address(remote: tuple[str, int]) -> tuple[bytes, int]:
    """A peer address as record fields: packed IP (IPv4-mapped IPv6 -> IPv4) and port."""
    host, port = remote[0], remote[1]
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return b"\x7f\x00\x00\x01", port
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.packed, port


# -- pushed to clients ------------------------------------------------------------------


def notify_consumer_ids_changed(group: str, channels: list[ClientChannel]) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED to every member of `group` (ConsumerManager's on_change)."""
    command = RemotingCommand.request(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
    )
    for channel in channels:
        try:
            channel.connection.send_oneway(command)
        except (RemotingError, ProtocolError) as exc:
            log.debug("notify %s of %s failed: %s", channel.client_id, group, exc)


def push_reset_offset(
    channels: Iterable[ClientChannel], header: ResetOffsetRequestHeader, body: bytes
) -> None:
    """RESET_CONSUMER_CLIENT_OFFSET with the new offsets to the online members."""
    ext = encode_header(
        ResetOffsetRequestHeader(
            topic=header.topic,
            group=header.group,
            timestamp=header.timestamp,
            is_force=header.is_force,
        )
    )
    command = RemotingCommand.request(
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, oneway=True
    )
    for channel in channels:
        try:
            channel.connection.send_oneway(command)
        except (RemotingError, ProtocolError) as exc:
            log.debug("reset push to %s failed: %s", channel.client_id, exc)
