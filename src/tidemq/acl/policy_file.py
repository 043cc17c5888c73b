"""The policy file in force, and its reload when it changes (no restart).

``poll()`` is called often (the broker calls it every second); at most every
``interval_s`` on the injected clock it looks at the file: an unchanged
(mtime, size, inode) means nothing to do; otherwise the bytes are read and a
new SHA-256 is parsed. A good file replaces the policy (``on_change`` is told);
a bad one, or a file gone missing, keeps the last good policy and is logged
once per distinct fault. RocketMQ polls its ACL files every 5 s
(rocketmq-all-4.9.8 ``srvutil/.../AclFileWatchService.java`` WATCH_INTERVAL)
and likewise keeps the old policy when the new file does not load.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from tidemq.common.clock import Clock

from .plain_config import AclConfigError, parse_plain_acl
from .validator import AclPolicy

__all__ = ["DEFAULT_POLL_INTERVAL_S", "PolicyFile"]

log = logging.getLogger("tidemq.acl")

DEFAULT_POLL_INTERVAL_S = 5.0


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _parse(path: Path, raw: bytes) -> AclPolicy:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AclConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return AclPolicy(parse_plain_acl(text))
    except AclConfigError as e:
        raise AclConfigError(f"{path}: {e}") from None


class PolicyFile:
    """A ``plain_acl.yml`` on disk and the last good policy read from it."""

    def __init__(
        self,
        path: str | Path,
        clock: Clock,
        *,
        interval_s: float = DEFAULT_POLL_INTERVAL_S,
        on_change: Callable[[AclPolicy], None] | None = None,
    ) -> None:
        """Read the file now; AclConfigError if it cannot be used (a server
        must not start with a policy it cannot read)."""
        self.path = Path(path)
        self._clock = clock
        self._interval_s = interval_s
        self.on_change = on_change
        """Told each new policy (the server's gate takes it)."""
        try:
            key = _stat_key(self.path)
            raw = self.path.read_bytes()
        except OSError as e:
            raise AclConfigError(f"cannot read {self.path}: {e.strerror or e}") from None
        self._policy = _parse(self.path, raw)
        self._key: tuple[int, int, int] | None = key
        self._digest = hashlib.sha256(raw).digest()
        self._last_poll = clock.monotonic()
        self._fault: str | None = None
        self.reloads = 0
        """Good reloads since start."""

    @property
    def policy(self) -> AclPolicy:
        """The last good policy."""
        return self._policy

    def poll(self) -> bool:
        """Look at the file if ``interval_s`` has passed; True when a new policy was taken."""
        now = self._clock.monotonic()
        if now - self._last_poll < self._interval_s:
            return False
        self._last_poll = now
        return self.reload()

    def reload(self) -> bool:
        """Look at the file now; True when a new policy was taken."""
        try:
            key = _stat_key(self.path)
            if key == self._key:
                return False
            raw = self.path.read_bytes()
        except OSError as e:
            self._key = None
            self._report(f"cannot read {self.path}: {e.strerror or e}")
            return False
        self._key = key
        digest = hashlib.sha256(raw).digest()
        if digest == self._digest:
            self._fault = None  # back to the policy in force
            return False
        try:
            policy = _parse(self.path, raw)
        except AclConfigError as e:
            self._report(str(e))
            return False
        self._digest = digest
        self._policy = policy
        self._fault = None
        self.reloads += 1
        log.info(
            "ACL policy reloaded from %s: %d account(s)", self.path, len(policy.config.accounts)
        )
        if self.on_change is not None:
            self.on_change(policy)
        return True

    def _report(self, fault: str) -> None:
        if fault != self._fault:
            self._fault = fault
            log.error("ACL policy not reloaded, the last good one stays in force: %s", fault)
