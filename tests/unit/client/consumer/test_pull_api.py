"""pull_api without a broker: the PULL_MESSAGE header it builds and how it reads answers."""

from __future__ import annotations

import pytest

from tidemq.client.consumer.pull_api import (
    PullStatus,
    pull_request_fields,
    pull_result,
    pull_timeout,
)
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.client.errors import ClientError
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import MessageQueue
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    decode_header,
    encode_header,
)
from tidemq.record.codec import encode_record

MQ = MessageQueue("T", "broker-a", 2)
TAG_A = SubscriptionSpec.parse("T", "TagA", sub_version=1234)


def record(offset: int, tag: str) -> bytes:
    return encode_record(
        topic=b"T",
        queue_id=2,
        flag=0,
        queue_offset=offset,
        physical_offset=1000 + offset,
        sys_flag=0,
        born_timestamp=1,
        born_host=bytes([127, 0, 0, 1]),
        born_port=1,
        store_timestamp=2,
        store_host=bytes([127, 0, 0, 1]),
        store_port=10911,
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=f"body{offset}".encode(),
        properties=props.encode_properties_bytes({props.TAGS: tag}),
    )


def answer(code: int, body: bytes = b"", remark: str | None = None) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    fields = encode_header(
        PullMessageResponseHeader(
            suggest_which_broker_id=0, next_begin_offset=9, min_offset=0, max_offset=12
        )
    )
    return RemotingCommand.response_to(request, code, remark, fields, body)


def test_request_header_carries_the_flags_java_sets() -> None:
    fields = pull_request_fields(
        group="cg", mq=MQ, subscription=TAG_A, offset=5, max_nums=16, commit_offset=3
    )
    header = decode_header(PullMessageRequestHeader, fields)
    assert (header.consumer_group, header.topic, header.queue_id) == ("cg", "T", 2)
    assert (header.queue_offset, header.max_msg_nums, header.commit_offset) == (5, 16, 3)
    assert header.sys_flag == sysflag.build_pull_sys_flag(
        commit_offset=True, suspend=True, subscription=True
    )
    assert header.suspend_timeout_millis == 15_000
    assert (header.subscription, header.expression_type, header.sub_version) == (
        "TagA",
        "TAG",
        1234,
    )


def test_no_commit_no_suspend_no_subscription() -> None:
    fields = pull_request_fields(
        group="cg",
        mq=MQ,
        subscription=TAG_A,
        offset=0,
        commit_offset=0,
        suspend_ms=0,
        send_subscription=False,
    )
    header = decode_header(PullMessageRequestHeader, fields)
    assert header.sys_flag == 0
    assert header.commit_offset == 0
    assert header.subscription is None


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [({"offset": -1}, "offset"), ({"max_nums": 0}, "max_nums"), ({"suspend_ms": -5}, "suspend")],
)
def test_bad_arguments(arguments: dict[str, int], complaint: str) -> None:
    options: dict[str, int] = {"offset": 0} | arguments
    with pytest.raises(ValueError, match=complaint):
        pull_request_fields(group="cg", mq=MQ, subscription=TAG_A, **options)


def test_timeout_covers_the_suspend() -> None:
    assert pull_timeout(15_000, 3.0) == 20.0
    assert pull_timeout(0, 3.0) == 3.0


def test_found_is_filtered_exactly_and_stamped_with_min_max() -> None:
    body = record(4, "TagA") + record(5, "TagB") + record(6, "TagA") + record(3, "TagA")
    result = pull_result(
        answer(ResponseCode.SUCCESS, body), mq=MQ, offset=4, subscription=TAG_A, address="b:1"
    )
    assert result.status is PullStatus.FOUND
    assert result.unfiltered_count == 4
    assert [m.queue_offset for m in result.messages] == [4, 6]  # TagB and offset 3 left out
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (9, 0, 12)
    assert result.messages[0].properties[props.MIN_OFFSET] == "0"
    assert result.messages[0].properties[props.MAX_OFFSET] == "12"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_status_mapping(code: int, status: PullStatus) -> None:
    result = pull_result(answer(code), mq=MQ, offset=4, subscription=TAG_A, address="b:1")
    assert result.status is status
    assert result.messages == []
    assert result.next_begin_offset == 9


def test_other_codes_are_client_errors_with_the_remark() -> None:
    with pytest.raises(ClientError, match="subscription group not exist") as error:
        pull_result(
            answer(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark="subscription group not exist"
            ),
            mq=MQ,
            offset=0,
            subscription=TAG_A,
            address="b:1",
        )
    assert error.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "T/broker-a/2" in str(error.value)


def test_malformed_answers_are_client_errors() -> None:
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    headerless = RemotingCommand.response_to(request, ResponseCode.PULL_NOT_FOUND)
    with pytest.raises(ClientError, match="malformed pull response"):
        pull_result(headerless, mq=MQ, offset=0, subscription=TAG_A, address="b:1")
    with pytest.raises(ClientError, match="malformed messages"):
        pull_result(
            answer(ResponseCode.SUCCESS, b"\x00\x00\x00\x10garbage"),
            mq=MQ,
            offset=0,
            subscription=TAG_A,
            address="b:1",
        )
