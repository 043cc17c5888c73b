"""The one error type of the SQL92 filter language."""

from __future__ import annotations


class SqlFilterError(ValueError):
    """Unparsable expression; str() names the problem and the position.

    ``position`` is the 0-based character offset of the offending token
    (the text length when the input ends too early).
    """

    def __init__(self, problem: str, position: int) -> None:
        super().__init__(f"{problem} at position {position}")
        self.problem = problem
        self.position = position
