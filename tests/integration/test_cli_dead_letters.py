"""`tidemq consumer dead-letters`, `resend` and `consume-directly` against a real
`tidemq serve`: a message a push consumer gives up on is listed with where it came
from, resending it gives it back to the group, which consumes it again, and
consume-directly runs the listener over it at once and reports how it went."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cli_support import Cli, serve_args

from tidemq.client._core.rebalance import ConsumeFromWhere
from tidemq.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeStatus
from tidemq.client.consumer.push import PushConsumer
from tidemq.common.message import MessageExt
from tidemq.testing.processes import started
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow

GROUP = "PayReaders"


def test_list_and_resend_dead_letters(tmp_path: Path) -> None:
    with started(serve_args(tmp_path / "data"), tmp_path, "serve") as (_, ready):
        cli = Cli(tmp_path, ready["namesrv"])
        cli.json("topic", "create", "Pay", "--queues", "1")
        assert "has no dead letters" in cli.run("consumer", "dead-letters", GROUP).stdout
        cli.json("send", "Pay", "pay 1", "--keys", "p1")
        seen: list[bytes] = []
        forgiven = threading.Event()
        broken = threading.Event()

        def listener(messages: list[MessageExt], _: ConsumeConcurrentlyContext) -> ConsumeStatus:
            seen.extend(m.body for m in messages)
            if broken.is_set():
                raise RuntimeError("the payment service is down")
            if forgiven.is_set():
                return ConsumeStatus.CONSUME_SUCCESS
            return ConsumeStatus.RECONSUME_LATER  # no retries left: a dead letter at once

        consumer = PushConsumer(
            GROUP,
            namesrv=ready["namesrv"],
            listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            max_reconsume_times=0,
        )
        consumer.subscribe("Pay")
        consumer.start()
        try:
            listed = wait_until(
                lambda: (d := cli.json("consumer", "dead-letters", GROUP))["messages"] and d,
                "pay 1 among the dead letters",
            )
            (letter,) = listed["messages"]
            assert (letter["body"], letter["origin_topic"], letter["keys"]) == (
                "pay 1",
                "Pay",
                ["p1"],
            )
            assert letter["topic"] == f"%DLQ%{GROUP}" and listed["cut"] is False
            text = cli.run("consumer", "dead-letters", GROUP).stdout
            assert "from=Pay" in text and '"pay 1"' in text

            forgiven.set()
            (resent,) = cli.json("consumer", "resend", GROUP, letter["msg_id"])
            assert resent["error"] is None and resent["resent_as"]
            wait_until(lambda: seen.count(b"pay 1") == 2, "pay 1 consumed again")

            # consume-directly: the listener runs over the message now, offsets untouched
            tried = cli.json("consumer", "consume-directly", GROUP, letter["offset_msg_id"])
            assert tried["consumeResult"] == "CR_SUCCESS" and tried["order"] is False
            assert tried["client_id"] and seen.count(b"pay 1") == 3
            broken.set()
            failed = cli.run("consumer", "consume-directly", GROUP, letter["msg_id"],
                             "--topic", f"%DLQ%{GROUP}")  # fmt: skip
            assert failed.returncode == 1
            assert "CR_THROW_EXCEPTION (RuntimeError: the payment service is down)" in failed.stdout
            broken.clear()

            unknown = cli.run("consumer", "resend", GROUP, "0A0000000000000000000000DEADBEEF")
            assert unknown.returncode == 1 and "FAILED" in unknown.stdout
            assert "1 of 1 not resent" in unknown.stderr
        finally:
            consumer.shutdown()
