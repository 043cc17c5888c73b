"""Errors of the JSON API: always a JSON object with a readable message and the right status.

Handlers raise `ApiError` for what they refuse themselves; an `AdminError`
from the cluster (a broker's or name server's answer, or no answer) is
turned into the status that says whose fault it is: the caller's (400, 403,
404) or the cluster's (502, 504). Anything else is a 500 whose text names
the failure, and the server stays up. Every body is
``{"error": "...", "code": "TOPIC_NOT_EXIST" | null}``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from tidemq.client.admin import AdminError
from tidemq.protocol.codes import ResponseCode, response_code_name

__all__ = ["ApiError", "error_response", "json_errors", "status_of"]

log = logging.getLogger(__name__)

_NOT_FOUND = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.QUERY_NOT_FOUND,
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        ResponseCode.SUBSCRIPTION_NOT_EXIST,
        ResponseCode.NO_MESSAGE,
        ResponseCode.BROKER_NOT_EXIST,
        ResponseCode.USER_NOT_EXIST,
        ResponseCode.POLICY_NOT_EXIST,
    }
)
_BAD_REQUEST = frozenset(
    {
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.INVALID_PARAMETER,
        ResponseCode.ILLEGAL_OPERATION,
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        ResponseCode.TOPIC_EXIST_ALREADY,
    }
)
_TIMEOUT = frozenset({ResponseCode.RPC_TIME_OUT})
_UNREACHABLE = frozenset(
    {
        ResponseCode.RPC_UNKNOWN,
        ResponseCode.RPC_ADDR_IS_NULL,
        ResponseCode.RPC_SEND_TO_CHANNEL_FAILED,
    }
)


class ApiError(Exception):
    """A refusal the API makes itself: `status` and a message for people."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def status_of(code: int) -> int:
    """The HTTP status of an AdminError's RocketMQ response code."""
    if code == ResponseCode.NO_PERMISSION:
        return 403
    if code in _NOT_FOUND:
        return 404
    if code in _BAD_REQUEST:
        return 400
    if code in _TIMEOUT:
        return 504
    if code in _UNREACHABLE:
        return 502
    return 502


def error_response(status: int, message: str, code: str | None = None) -> web.Response:
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="tidemq", charset="UTF-8"'
    return web.json_response({"error": message, "code": code}, status=status, headers=headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure under /api as a JSON error (see the module docstring)."""
    if not request.path.startswith("/api/"):
        return await handler(request)
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.message, exc.code)
    except AdminError as exc:
        return error_response(status_of(exc.code), exc.message, response_code_name(exc.code))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.text if exc.text and exc.status != 404 else f"no API at {request.path}"
        if exc.status == 405:
            message = f"{request.method} is not allowed on {request.path}"
        return error_response(exc.status, message)
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, f"the request failed: {type(exc).__name__}: {exc}")
