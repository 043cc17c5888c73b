"""Java's Properties text, as RocketMQ puts broker configs on the wire
(MixAll.properties2String / string2Properties: GET_BROKER_CONFIG's answer,
UPDATE_BROKER_CONFIG's body)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["java_properties_text", "parse_java_properties"]


def parse_java_properties(text: str) -> dict[str, str]:
    """`key=value` lines; comments (`#`, `!`), blanks and lines without `=` skipped."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


def java_properties_text(settings: Mapping[str, str]) -> str:
    """`key=value` lines, one a setting."""
    return "".join(f"{key}={value}\n" for key, value in settings.items())
