"""Small pure pieces of the push consumer: listener statuses and kinds,
settings validation, retry-topic restoring, the send-back header."""

from __future__ import annotations

import pytest

from tidemq.client.consumer.context import ConsumerSettings
from tidemq.client.consumer.listener import (
    ConsumeOrderlyStatus,
    ConsumeStatus,
    concurrent_status,
    is_async_listener,
    orderly_status,
)
from tidemq.client.consumer.send_back import origin_message_id, restore_retry_topics
from tidemq.common import properties as props
from tidemq.common.message import MessageExt


def test_statuses_default_to_failure() -> None:
    assert concurrent_status(ConsumeStatus.CONSUME_SUCCESS) is ConsumeStatus.CONSUME_SUCCESS
    assert concurrent_status(None) is ConsumeStatus.RECONSUME_LATER
    assert concurrent_status("CONSUME_SUCCESS") is ConsumeStatus.RECONSUME_LATER
    assert orderly_status(ConsumeOrderlyStatus.SUCCESS) is ConsumeOrderlyStatus.SUCCESS
    assert orderly_status(None) is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
    assert orderly_status(True) is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


def test_listener_kinds() -> None:
    def plain(msgs: object, ctx: object) -> None:
        return None

    async def coroutine(msgs: object, ctx: object) -> None:
        return None

    class AsyncCallable:
        async def __call__(self, msgs: object, ctx: object) -> None:
            return None

    class PlainCallable:
        def __call__(self, msgs: object, ctx: object) -> None:
            return None

    assert not is_async_listener(plain)
    assert is_async_listener(coroutine)
    assert is_async_listener(AsyncCallable())
    assert not is_async_listener(PlainCallable())


def test_default_settings_are_valid_and_java_like() -> None:
    settings = ConsumerSettings()
    settings.validate()
    assert settings.effective_max_reconsume_times == 16
    settings.orderly = True
    assert settings.effective_max_reconsume_times == 2**31 - 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("consume_thread_count", 0, "consume_thread_count"),
        ("consume_message_batch_max_size", 2000, "consume_message_batch_max_size"),
        ("pull_batch_size", 0, "pull_batch_size"),
        ("pull_threshold_for_queue", 0, "pull_threshold_for_queue"),
        ("pull_threshold_size_for_queue_mib", 2048, "pull_threshold_size_for_queue_mib"),
        ("consume_concurrently_max_span", 0, "consume_concurrently_max_span"),
        ("max_reconsume_times", -2, "max_reconsume_times"),
        ("consume_timeout_min", 0, "consume_timeout_min"),
        ("suspend_current_queue_time_ms", 5, "suspend_current_queue_time_ms"),
        ("pull_interval_s", -1, "pull_interval_s"),
    ],
)
def test_bad_settings_are_refused(field: str, value: object, message: str) -> None:
    settings = ConsumerSettings()
    setattr(settings, field, value)
    with pytest.raises(ValueError, match=message):
        settings.validate()


def test_retry_copies_get_their_topic_back() -> None:
    retry = MessageExt("%RETRY%G", msg_id="b")
    retry.properties[props.RETRY_TOPIC] = "Orders"
    retry.properties[props.ORIGIN_MESSAGE_ID] = "a"
    other_group = MessageExt("%RETRY%H", msg_id="c")
    other_group.properties[props.RETRY_TOPIC] = "Orders"
    plain = MessageExt("Orders", msg_id="d")
    restore_retry_topics([retry, other_group, plain], "G")
    assert [m.topic for m in (retry, other_group, plain)] == ["Orders", "%RETRY%H", "Orders"]
    assert origin_message_id(retry) == "a"
    assert origin_message_id(plain) == "d"
