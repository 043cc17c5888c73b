"""A run of failures of one repeated action, logged as two lines instead of one per try.

A broker out of file descriptors fails every periodic write (checkpoints,
progress files) each time it tries, once a second or more; a traceback per
try buried the one line that mattered under megabytes (issue #14). Here the
first failure is logged with its traceback, the later ones are only counted,
and the first success after them says how many tries failed.
"""

from __future__ import annotations

import logging


class FailureEpisode:
    """Call `failed()` inside the `except` of each failed try, `succeeded()` after each success."""

    __slots__ = ("_logger", "_what", "failures")

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self.failures = 0
        """Failed tries since the last success."""

    def failed(self) -> None:
        self.failures += 1
        if self.failures == 1:
            self._logger.exception("%s failed; retrying (logged again when it works)", self._what)

    def succeeded(self) -> None:
        if self.failures:
            self._logger.warning("%s works again after %d failed tries", self._what, self.failures)
            self.failures = 0
