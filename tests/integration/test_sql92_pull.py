"""SQL92 subscriptions end to end: the broker filters pulls by the compiled
expression over message properties (and TAGS); a bad expression is refused
with SUBSCRIPTION_PARSE_FAILED naming the position."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer
from tidemq.client.consumer.pull_api import PullStatus, pull_message
from tidemq.client.consumer.push import AsyncPushConsumer
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.producer import make_message
from tidemq.common.message import Message, MessageExt
from tidemq.protocol import ResponseCode
from tidemq.testing.client_support import create_topic, produce
from tidemq.testing.processes import ServerProcess, serve, server_env
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow

EXPRESSION = "a > 5 AND region IN ('eu', 'us') AND TAGS <> 'TagSkip'"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("sql92") / "data") as process:
        yield process


def property_mixes(topic: str) -> tuple[list[Message], list[str]]:
    """One message per mix of `a`, `region` and tag, and the bodies EXPRESSION selects."""
    produced, selected = [], []
    mixes = [
        (a, region, tag)
        for a in ("1", "6", "9", "x", None)
        for region in ("eu", "us", "cn", None)
        for tag in ("TagA", "TagSkip")
    ]
    for index, (a, region, tag) in enumerate(mixes):
        properties = {k: v for k, v in (("a", a), ("region", region)) if v is not None}
        produced.append(make_message(topic, f"m{index}", tags=tag, properties=properties))
        if a in ("6", "9") and region in ("eu", "us") and tag != "TagSkip":
            selected.append(f"m{index}")
    return produced, selected


async def test_push_consumer_gets_exactly_the_matching_messages(server: ServerProcess) -> None:
    topic, group = unique_name("Sql"), unique_name("G")
    await create_topic(server.namesrv, topic, queues=2)
    produced, selected = property_mixes(topic)
    await produce(server.namesrv, produced)
    got: list[str] = []
    lock = threading.Lock()

    def listener(batch: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeStatus:
        with lock:
            got.extend(m.body.decode() for m in batch)
        return ConsumeStatus.CONSUME_SUCCESS

    push = AsyncPushConsumer(
        group,
        server.namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    push.subscribe(topic, EXPRESSION, "SQL92")
    await push.start()
    try:
        await eventually(lambda: sorted(got) == sorted(selected), "the selected messages")
        assert len(selected) == 4
    finally:
        await push.shutdown()
    assert sorted(got) == sorted(selected)  # nothing else arrived meanwhile


async def test_a_bad_expression_is_refused_with_its_position(server: ServerProcess) -> None:
    topic = unique_name("SqlBad")
    queues = await create_topic(server.namesrv, topic, queues=1)
    instance = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        await instance.route(topic)
        spec = SubscriptionSpec.parse(topic, "a > AND b = 1", "SQL92", sub_version=1)
        with pytest.raises(ClientError) as caught:
            await pull_message(
                instance,
                group=unique_name("G"),
                mq=queues[0],
                subscription=spec,
                offset=0,
                suspend_ms=0,
            )
        assert caught.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "position 4" in str(caught.value)
        good = SubscriptionSpec.parse(topic, "a IS NULL", "SQL92", sub_version=1)
        result = await pull_message(
            instance,
            group=unique_name("G"),
            mq=queues[0],
            subscription=good,
            offset=0,
            suspend_ms=0,
        )
        assert result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG)
    finally:
        await instance.close()


async def test_lite_pull_and_the_cli_filter_with_sql92(
    server: ServerProcess, tmp_path: Path
) -> None:
    topic = unique_name("SqlPoll")
    await create_topic(server.namesrv, topic, queues=2)
    produced, selected = property_mixes(topic)
    await produce(server.namesrv, produced)

    consumer = AsyncLitePullConsumer(
        unique_name("G"),
        server.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, EXPRESSION, "SQL92")
    await consumer.start()
    polled: list[str] = []
    try:

        async def all_polled() -> bool:
            polled.extend(m.body.decode() for m in await consumer.poll(timeout_s=0.5))
            return sorted(polled) == sorted(selected)

        await eventually(all_polled, "the selected messages by lite pull")
    finally:
        await consumer.shutdown()

    command = [
        sys.executable,
        "-m",
        "tidemq.cli.main",
        "consume",
        topic,
        "--sql",
        EXPRESSION,
        "--from-beginning",
        "--max",
        str(len(selected)),
        "--timeout",
        "20",
        "--json",
        "--namesrv",
        server.namesrv,
    ]
    result = await asyncio.to_thread(
        subprocess.run,
        command,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=server_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert sorted(row["body"] for row in rows) == sorted(selected)

    bad = [*command[:6], "a >", *command[7:]]
    refused = await asyncio.to_thread(
        subprocess.run,
        bad,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=server_env(tmp_path),
    )
    assert refused.returncode != 0
    error = json.loads(refused.stdout)  # with --json, the error is a JSON object too
    assert "position" in error["error"]


async def _pull_with(server_namesrv: str, topic: str, expression: str) -> object:
    """One SQL92 pull of queue 0 of `topic`; the PullResult or the ClientError raised."""
    queues = await create_topic(server_namesrv, topic, queues=1)
    instance = ClientInstance(ClientConfig(namesrv=server_namesrv))
    try:
        await instance.route(topic)
        spec = SubscriptionSpec.parse(topic, expression, "SQL92", sub_version=1)
        try:
            return await pull_message(
                instance,
                group=unique_name("G"),
                mq=queues[0],
                subscription=spec,
                offset=0,
                suspend_ms=0,
            )
        except ClientError as exc:
            return exc
    finally:
        await instance.close()


@pytest.mark.parametrize(
    "expression, position",
    [
        # 1 MiB of valid-looking clauses: refused by the 64 KiB limit before parsing.
        (" OR ".join(["a = 1"] * 116_600), 65536),
        # nesting far beyond the limit (64), short enough to reach the parser.
        ("(" * 10_000 + "a = 1" + ")" * 10_000, 64),
    ],
    ids=["1MiB-expression", "100k-nesting"],
)
async def test_malicious_expressions_are_refused_and_the_broker_stays_up(
    server: ServerProcess, expression: str, position: int
) -> None:
    outcome = await _pull_with(server.namesrv, unique_name("SqlEvil"), expression)
    assert isinstance(outcome, ClientError), outcome
    assert outcome.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert str(outcome).endswith(f"position {position}")
    # The broker still answers a normal SQL92 pull on the same connection pool.
    fine = await _pull_with(server.namesrv, unique_name("SqlFine"), "a IS NULL")
    assert not isinstance(fine, ClientError), fine


async def test_sql92_is_refused_when_the_property_filter_is_off(tmp_path: Path) -> None:
    with serve(tmp_path / "data", settings={"enable_property_filter": False}) as off:
        outcome = await _pull_with(off.namesrv, unique_name("SqlOff"), "a > 1")
    assert isinstance(outcome, ClientError), outcome
    assert outcome.code == ResponseCode.SYSTEM_ERROR
    assert "SQL92" in str(outcome)
