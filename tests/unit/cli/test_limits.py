"""The servers raise their soft open-files limit to the hard limit and report both."""

from __future__ import annotations

import resource

import pytest

from tidemq.cli.limits import OpenFiles, adjust_open_files

NOFILE = resource.RLIMIT_NOFILE


class Limits:
    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.value = (soft, hard)
        self.refuse = refuse
        self.calls: list[tuple[int, int]] = []

    def get(self, which: int) -> tuple[int, int]:
        assert which == NOFILE
        return self.value

    def set(self, which: int, value: tuple[int, int]) -> None:
        assert which == NOFILE
        self.calls.append(value)
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.value = value


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    limits = Limits(1024, 20000)
    result = adjust_open_files(limits.get, limits.set)
    assert limits.value == (20000, 20000)
    assert result == OpenFiles(1024, 20000, 20000)
    assert result.describe() == "open files: soft 1024 -> 20000 (hard 20000)"


def test_nothing_to_do_when_soft_is_already_hard() -> None:
    limits = Limits(4096, 4096)
    assert (
        adjust_open_files(limits.get, limits.set).describe() == "open files: soft 4096 (hard 4096)"
    )
    assert limits.calls == []


def test_a_refusal_is_reported_not_raised() -> None:
    limits = Limits(256, resource.RLIM_INFINITY, refuse=True)
    result = adjust_open_files(limits.get, limits.set)
    assert result.soft == 256
    assert result.describe() == (
        "open files: soft 256 (hard unlimited); could not raise it: "
        "not allowed to raise maximum limit"
    )


@pytest.mark.parametrize("soft", [resource.RLIM_INFINITY])
def test_an_unlimited_soft_limit_is_left_alone(soft: int) -> None:
    limits = Limits(soft, resource.RLIM_INFINITY)
    assert adjust_open_files(limits.get, limits.set).soft == soft
    assert limits.calls == []
