"""Names of the `version` a RocketMQ client sends: Java's MQVersion.Version ordinals.

A remoting command's `version` is `MQVersion.Version.X.ordinal()` (407 is
V4_9_7). RocketMQ's metrics name a client's version by the enum constant,
lower-cased (`MQVersion.getVersionDesc`; "v4_9_7" in the `version` label of
rocketmq_producer_connections), and an ordinal past the last constant as the
last one. The enum (apache/rocketmq common/.../MQVersion.java, 612
constants) has a regular shape, rebuilt here instead of copied:

* 16 constants of 3.0.0: SNAPSHOT, ALPHA1, BETA1..BETA5, then
  BETA6..BETA9 each preceded by its _SNAPSHOT, then FINAL;
* from 3.0.1 on, every release X as X_SNAPSHOT then X: 3.0.1..3.0.15,
  3.1.0..3.1.9, 3.2.0..3.2.9, 3.3.1..3.9.9 (no x.y.0 there), then
  4.0.0..5.9.9.
"""

from __future__ import annotations

from functools import cache

__all__ = ["version_name", "version_ordinal"]


def _releases() -> list[tuple[int, int, int]]:
    releases = [(3, 0, patch) for patch in range(1, 16)]
    releases += [(3, minor, patch) for minor in (1, 2) for patch in range(10)]
    releases += [(3, minor, patch) for minor in range(3, 10) for patch in range(1, 10)]
    releases += [
        (major, minor, patch) for major in (4, 5) for minor in range(10) for patch in range(10)
    ]
    return releases


@cache
def _names() -> tuple[str, ...]:
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"]
    names += [f"V3_0_0_BETA{n}" for n in range(1, 6)]
    for n in range(6, 10):
        names += [f"V3_0_0_BETA{n}_SNAPSHOT", f"V3_0_0_BETA{n}"]
    names.append("V3_0_0_FINAL")
    for major, minor, patch in _releases():
        release = f"V{major}_{minor}_{patch}"
        names += [f"{release}_SNAPSHOT", release]
    return tuple(names)


def version_name(ordinal: int) -> str:
    """ "V4_9_7" for 407; the last constant for anything past it, the first below 0."""
    names = _names()
    return names[min(max(ordinal, 0), len(names) - 1)]


def version_ordinal(text: str) -> int:
    """The ordinal of a release written "5.0.5" (a gRPC client's user agent);
    0 when no constant has that name."""
    wanted = "V" + text.strip().replace(".", "_").upper()
    try:
        return _names().index(wanted)
    except ValueError:
        return 0
