"""tidemq.testing.waiting: the polling helper and unique names the client
integration tests share."""

from __future__ import annotations

import asyncio
import re

import pytest

from tidemq.testing.waiting import eventually, unique_name


async def test_eventually_returns_the_first_truthy_value_of_a_plain_check() -> None:
    values = iter([0, None, [], 3])
    assert await eventually(lambda: next(values), "three", interval=0) == 3


async def test_eventually_awaits_an_async_check() -> None:
    calls = 0

    async def ready() -> str | None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return "yes" if calls == 3 else None

    assert await eventually(ready, "ready", interval=0) == "yes"
    assert calls == 3


async def test_eventually_fails_after_the_deadline_naming_what_and_the_last_value() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    expected = r"timed out after 0.2 s waiting for the sky \(last: \[\]\)"
    with pytest.raises(AssertionError, match=expected):
        await eventually(lambda: [], "the sky", timeout=0.2, interval=0.05)
    assert 0.2 <= loop.time() - started < 5


class Falsy:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "x" * 1000


async def test_eventually_shortens_a_long_last_value() -> None:
    with pytest.raises(AssertionError) as error:
        await eventually(Falsy, "nothing", timeout=0)
    assert str(error.value).endswith("(last: " + "x" * 200 + "...)")


def test_unique_names_differ_and_are_valid_topic_and_group_names() -> None:
    names = {unique_name("T") for _ in range(1000)}
    assert len(names) == 1000
    assert all(re.fullmatch(r"T[0-9a-zA-Z_]{1,40}", name) for name in names)
