"""pull_result's record filter against the plain rule it implements: keep the
records at or after the pull offset whose tag the subscription accepts, in the
order the broker sent them (its shortcut for "*" must give the same answer)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.client.consumer.pull_api import PullStatus, pull_result
from tidemq.client.consumer.subscription import SubscriptionSpec
from tidemq.common import properties as props
from tidemq.common.message import MessageQueue
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import PullMessageResponseHeader, encode_header
from tidemq.record.codec import encode_record

MQ = MessageQueue("T", "broker-a", 2)
EXPRESSIONS = ["*", "TagA", "TagA || TagB"]


def record(offset: int, tag: str | None) -> bytes:
    properties = {props.TAGS: tag} if tag is not None else {}
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
        properties=props.encode_properties_bytes(properties),
    )


def found(body: bytes) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE)
    fields = encode_header(
        PullMessageResponseHeader(
            suggest_which_broker_id=0, next_begin_offset=99, min_offset=3, max_offset=120
        )
    )
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, fields, body)


@given(
    records=st.lists(
        st.tuples(st.integers(0, 60), st.sampled_from(["TagA", "TagB", "TagC", None])),
        max_size=20,
    ),
    start=st.integers(0, 40),
    expression=st.sampled_from(EXPRESSIONS),
)
def test_the_filter_keeps_exactly_what_the_rule_keeps(
    records: list[tuple[int, str | None]], start: int, expression: str
) -> None:
    spec = SubscriptionSpec.parse("T", expression, sub_version=1)
    body = b"".join(record(offset, tag) for offset, tag in records)
    result = pull_result(found(body), mq=MQ, offset=start, subscription=spec, address="b:1")
    accepted = spec.tags  # None: every tag
    expected = [
        offset
        for offset, tag in records
        if offset >= start and (accepted is None or (tag is not None and tag in accepted))
    ]
    assert result.status is PullStatus.FOUND
    assert [m.queue_offset for m in result.messages] == expected
    assert result.unfiltered_count == len(records)
    for message in result.messages:
        assert message.properties[props.MIN_OFFSET] == "3"
        assert message.properties[props.MAX_OFFSET] == "120"
