"""Reading request input: query parameters and JSON bodies, refused with a 400 that says why."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from aiohttp import web

from tidemq.web.errors import ApiError

__all__ = ["json_body", "optional_int", "required", "text", "timestamp_ms"]


def text(source: Mapping[str, Any], name: str) -> str | None:
    """A non-blank text value, trimmed, or None."""
    value = source.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be text, not {type(value).__name__}")
    value = value.strip()
    return value or None


def required(source: Mapping[str, Any], name: str) -> str:
    value = text(source, name)
    if value is None:
        raise ApiError(400, f"{name} is required")
    return value


def optional_int(
    source: Mapping[str, Any], name: str, *, low: int | None = None, high: int | None = None
) -> int | None:
    """An integer (a JSON number or its text) within [low, high], or None."""
    value = source.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ApiError(400, f"{name} must be a whole number, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"{name} must be a whole number, not {value!r}") from None
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
        raise ApiError(400, f"{name}={number} is out of range {bounds}")
    return number


def timestamp_ms(source: Mapping[str, Any], name: str) -> int | None:
    """A time: epoch milliseconds, or ISO-8601 (local time when it has no zone)."""
    value = source.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raw = str(value).strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            400, f"{name}={raw!r} is neither epoch milliseconds nor an ISO-8601 time"
        ) from None
    return int(when.timestamp() * 1000)


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (an empty body is {})."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ApiError(400, "the body must be a JSON object")
    return document
