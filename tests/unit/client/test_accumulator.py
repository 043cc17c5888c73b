"""The pure parts of automatic batching: which sends may be held, how a batch's
answer is split per message, and the limits' checks (Java's values and texts)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.client._accumulator import BatchLimits, SendAccumulator, can_batch, split_result
from tidemq.client.model import SendResult, SendStatus
from tidemq.common import properties as props
from tidemq.common.message import Message, MessageQueue
from tidemq.common.tasks import TaskSet


def result(msg_id: str, offset_msg_id: str, queue_offset: int) -> SendResult:
    return SendResult(SendStatus.SEND_OK, msg_id, offset_msg_id, "T", "b", 3, queue_offset)


@given(
    ids=st.lists(st.text("0123456789ABCDEF", min_size=4, max_size=8), min_size=2, max_size=40),
    first=st.integers(0, 2**40),
)
def test_a_batch_answer_splits_into_one_result_per_message(ids: list[str], first: int) -> None:
    broker_ids = [f"X{i}" for i in range(len(ids))]
    split = split_result(result(",".join(ids), ",".join(broker_ids), first), len(ids))
    assert [r.msg_id for r in split] == ids
    assert [r.offset_msg_id for r in split] == broker_ids
    assert [r.queue_offset for r in split] == list(range(first, first + len(ids)))
    assert {(r.queue_id, r.broker_name, r.status) for r in split} == {(3, "b", SendStatus.SEND_OK)}


def test_an_answer_with_one_id_is_every_message_s_result() -> None:
    one = result("A", "X", 7)
    assert split_result(one, 3) == [one, one, one]


def test_an_answer_naming_too_few_ids_is_an_error() -> None:
    with pytest.raises(ValueError, match="names 2 ids"):
        split_result(result("A,B", "X,Y", 0), 3)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (Message("T", b"x"), True),
        (Message("T", b"x", properties={props.TAGS: "a", props.KEYS: "k"}), True),
        (Message("T", b""), False),
        (Message("%RETRY%G", b"x"), False),
        (Message("T", b"x", properties={props.DELAY: "3"}), False),
        (Message("T", b"x", properties={props.DELAY: "0"}), True),
        (Message("T", b"x", properties={props.TIMER_DELIVER_MS: "1"}), False),
        (Message("T", b"x", properties={props.TIMER_DELAY_SEC: "1"}), False),
        (Message("T", b"x", properties={props.PGROUP: "P"}), False),
        (Message("T", b"x", properties={props.TRAN_MSG: "true"}), False),
    ],
)
def test_which_sends_may_be_held(message: Message, expected: bool) -> None:
    assert can_batch(message) is expected


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"max_delay_ms": 0}, "batch_max_delay_ms expect between 1ms and 30s, but get 0!"),
        ({"max_delay_ms": 30_001}, "between 1ms and 30s"),
        ({"max_bytes": 0}, "batch_max_bytes expect between 1B and 2MB, but get 0!"),
        ({"max_bytes": 2 * 1024 * 1024 + 1}, "between 1B and 2MB"),
        ({"total_max_bytes": 0}, "total_batch_max_bytes must bigger then 0, but get 0!"),
    ],
)
def test_limits_out_of_java_s_bounds_are_refused(kwargs: dict[str, int], text: str) -> None:
    with pytest.raises(ValueError, match=text.replace("(", r"\(")):
        BatchLimits(**kwargs)


async def test_held_sends_go_out_by_key_size_and_time() -> None:
    """The accumulator's own logic with a recording batch sender (no network):
    keys split batches, passing max_bytes sends at once, the rest after the delay,
    and the held bytes return to zero once answered."""
    sent: list[tuple[list[bytes], MessageQueue | None]] = []
    released = asyncio.Event()

    async def send_batch(messages: object, queue: MessageQueue | None) -> SendResult:
        batch = list(messages)  # type: ignore[call-overload]
        sent.append(([m.body for m in batch], queue))
        await released.wait()
        ids = ",".join(f"U{len(sent)}-{i}" for i in range(len(batch)))
        return result(ids, ids, 100)

    tasks = TaskSet("test batches")
    accumulator = SendAccumulator(send_batch, BatchLimits(max_delay_ms=50, max_bytes=10), tasks)
    queue = MessageQueue("T", "b", 1)
    a = [
        accumulator.offer(Message("T", b"aaaa", properties={props.TAGS: "A"}), None)
        for _ in range(3)
    ]
    b = accumulator.offer(Message("T", b"bb", properties={props.TAGS: "B"}), None)
    q = accumulator.offer(Message("T", b"q"), queue)
    await asyncio.sleep(0)  # the size-triggered batch's task starts
    assert sent == [([b"aaaa"] * 3, None)]  # 12 bytes > 10: sent without waiting
    assert accumulator.held_bytes == 12 + 2 + 1
    deadline = asyncio.get_running_loop().time() + 5
    while len(sent) < 3 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert sent[0] == ([b"aaaa"] * 3, None)
    assert sorted(map(repr, sent[1:])) == sorted(map(repr, [([b"bb"], None), ([b"q"], queue)]))
    released.set()
    futures = [f for f in (*a, b, q) if f is not None]
    assert len(futures) == 5
    results = await asyncio.gather(*futures)
    assert [r.queue_offset for r in results[:3]] == [100, 101, 102]
    assert accumulator.held_bytes == 0
    assert accumulator.offer(Message("T", b"x", properties={props.DELAY: "2"}), None) is None
    await tasks.cancel_all()


async def test_a_full_accumulator_sends_alone() -> None:
    async def never(messages: object, queue: MessageQueue | None) -> SendResult:
        raise AssertionError("not sent in this test")

    tasks = TaskSet("test full")
    accumulator = SendAccumulator(
        never, BatchLimits(max_delay_ms=30_000, max_bytes=100, total_max_bytes=8), tasks
    )
    held = accumulator.offer(Message("T", b"12345678"), None)
    assert held is not None
    assert accumulator.offer(Message("T", b"x"), None) is None  # 8 bytes held: full
    held.cancel()
    await tasks.cancel_all()
