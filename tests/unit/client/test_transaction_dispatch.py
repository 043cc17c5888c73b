"""How a transaction reaches the wire and comes back: the send codec marks a
half message PREPARED, and the ClientInstance hands a broker's
CHECK_TRANSACTION_STATE to the producer of the half's group (PGROUP)."""

from __future__ import annotations

import logging
import zlib
from types import SimpleNamespace
from typing import Any

import pytest

from tidemq.client._send import SendCodec
from tidemq.client.instance import ClientConfig, ClientInstance, TransactionChecker
from tidemq.client.model import TopicRoute
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import Message, MessageExt
from tidemq.protocol import RemotingCommand, RequestCode
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, encode_header
from tidemq.record.codec import encode_record

# -- the half message's sysflag ------------------------------------------------------------


def codec() -> SendCodec:
    return SendCodec("TxGroup", lambda: "UNIQ-FIXED", compress_over_bytes=64)


@pytest.mark.parametrize("body", [b"small", b"x" * 1000])
def test_a_transactional_message_is_sent_prepared(body: bytes) -> None:
    message = Message("T", body, properties={props.TRAN_MSG: "true", props.PGROUP: "TxGroup"})
    flag = int(codec().prepare(message).fields["f"])
    assert sysflag.transaction_value(flag) == sysflag.TRANSACTION_PREPARED_TYPE
    assert sysflag.is_compressed(flag) == (len(body) >= 64)


@pytest.mark.parametrize("value", [None, "false", "TRUE"])
def test_other_messages_are_not_prepared(value: str | None) -> None:
    message = Message("T", b"x", properties={} if value is None else {props.TRAN_MSG: value})
    flag = int(codec().prepare(message).fields["f"])
    assert sysflag.transaction_value(flag) == sysflag.TRANSACTION_NOT_TYPE


# -- CHECK_TRANSACTION_STATE dispatch --------------------------------------------------------


class Checking:
    """A producer member that records the checks it is given."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.checks: list[tuple[str, MessageExt, CheckTransactionStateRequestHeader]] = []

    def published_topics(self) -> list[str]:
        return []

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        pass

    def check_transaction_state(
        self, broker_address: str, message: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        self.checks.append((broker_address, message, header))


class Plain:
    """A producer member that does not check transactions."""

    def __init__(self, group: str) -> None:
        self.group = group

    def published_topics(self) -> list[str]:
        return []

    def on_route_changed(self, topic: str, route: TopicRoute) -> None:
        pass


def check_command(
    group: str, body: bytes = b"payload", *, compress: bool = False
) -> RemotingCommand:
    properties = {props.UNIQ_KEY: "UNIQ-9", props.TRAN_MSG: "true", props.PGROUP: group}
    stored = zlib.compress(body) if compress else body
    record = encode_record(
        b"OrderTopic",
        2,
        0,
        17,
        8192,
        sysflag.COMPRESSED if compress else 0,
        1_700_000_000_000,
        bytes([10, 0, 0, 9]),
        40000,
        1_700_000_000_100,
        bytes([10, 0, 0, 1]),
        10911,
        0,
        0,
        stored,
        props.encode_properties(properties).encode(),
    )
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=17,
        commit_log_offset=8192,
        msg_id="UNIQ-9",
        transaction_id="UNIQ-9",
        offset_msg_id="0A00000100002A9F0000000000002000",
        topic="OrderTopic",
    )
    return RemotingCommand.request(
        RequestCode.CHECK_TRANSACTION_STATE, encode_header(header), record, oneway=True
    )


async def dispatch(instance: ClientInstance, request: RemotingCommand) -> object:
    connection: Any = SimpleNamespace(remote=("10.0.0.1", 10911))
    return await instance._on_server_request(request, connection)


def instance_with(*members: Any) -> ClientInstance:
    instance = ClientInstance(ClientConfig(namesrv="127.0.0.1:1", client_ip="10.0.0.9"))
    for member in members:
        instance.register_producer(member)
    return instance


@pytest.mark.parametrize("compress", [False, True])
async def test_a_check_goes_to_the_producer_of_the_pgroup(compress: bool) -> None:
    wanted, other = Checking("TxGroup"), Checking("OtherGroup")
    assert isinstance(wanted, TransactionChecker)
    instance = instance_with(other, wanted)
    answer = await dispatch(instance, check_command("TxGroup", compress=compress))
    assert answer is None  # oneway: answered later with END_TRANSACTION
    assert other.checks == []
    ((address, message, header),) = wanted.checks
    assert address == "10.0.0.1:10911"
    assert (message.topic, message.queue_id, message.queue_offset) == ("OrderTopic", 2, 17)
    assert message.body == b"payload" and message.commit_log_offset == 8192
    assert message.properties[props.UNIQ_KEY] == "UNIQ-9"
    assert (header.tran_state_table_offset, header.commit_log_offset) == (17, 8192)
    assert header.transaction_id == "UNIQ-9"


async def test_checks_for_unknown_or_non_transactional_groups_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "tidemq.client.instance")
    checking = Checking("TxGroup")
    instance = instance_with(checking, Plain("PlainGroup"))
    assert await dispatch(instance, check_command("NobodyHere")) is None
    assert await dispatch(instance, check_command("PlainGroup")) is None
    assert checking.checks == []
    assert "'NobodyHere' ignored" in caplog.text and "'PlainGroup' ignored" in caplog.text


async def test_a_malformed_check_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    checking = Checking("TxGroup")
    instance = instance_with(checking)
    good = check_command("TxGroup")
    truncated = RemotingCommand.request(
        RequestCode.CHECK_TRANSACTION_STATE, good.ext_fields, good.body[:40], oneway=True
    )
    headless = RemotingCommand.request(
        RequestCode.CHECK_TRANSACTION_STATE, {}, good.body, oneway=True
    )
    assert await dispatch(instance, truncated) is None
    assert await dispatch(instance, headless) is None
    assert checking.checks == []
    assert caplog.text.count("malformed CHECK_TRANSACTION_STATE") == 2
