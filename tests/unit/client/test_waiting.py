"""tidemq.testing.waiting: the polling helpers (async and blocking) and unique
names the tests share."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from tidemq.testing.waiting import eventually, unique_name, wait_until


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
    assert loop.time() - started >= 0.2  # the whole deadline was given


class Falsy:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "x" * 1000


async def test_eventually_shortens_a_long_last_value() -> None:
    with pytest.raises(AssertionError) as error:
        await eventually(Falsy, "nothing", timeout=0)
    assert str(error.value).endswith("(last: " + "x" * 200 + "...)")


def test_wait_until_returns_the_first_truthy_value() -> None:
    values = iter([0, None, "", {"ok": 1}])
    assert wait_until(lambda: next(values), "a dict", interval=0) == {"ok": 1}


def test_wait_until_fails_after_the_deadline_naming_what_and_the_last_value() -> None:
    started = time.monotonic()
    expected = r"timed out after 0.2 s waiting for the sea \(last: 0\)"
    with pytest.raises(AssertionError, match=expected):
        wait_until(lambda: 0, "the sea", timeout=0.2, interval=0.05)
    assert time.monotonic() - started >= 0.2  # the whole deadline was given


def test_wait_until_shortens_a_long_last_value() -> None:
    with pytest.raises(AssertionError) as error:
        wait_until(Falsy, "nothing", timeout=0)
    assert str(error.value).endswith("(last: " + "x" * 200 + "...)")


async def test_wait_until_refuses_to_block_an_event_loop() -> None:
    with pytest.raises(RuntimeError, match="await eventually"):
        wait_until(lambda: True, "anything")


def test_unique_names_differ_and_are_valid_topic_and_group_names() -> None:
    names = {unique_name("T") for _ in range(1000)}
    assert len(names) == 1000
    assert all(re.fullmatch(r"T[0-9a-zA-Z_]{1,40}", name) for name in names)
