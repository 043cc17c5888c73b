"""The transactional producer's protocol over a scripted stand-in for the
ClientInstance: what a half send carries, when the listener runs, what
END_TRANSACTION says (after a send and after a check), and what is refused
before any I/O. Real brokers are in tests/integration/test_transactions.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig
from tidemq.client.model import BrokerData, QueueData, SendStatus, TopicRoute
from tidemq.client.transaction import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionSendResult,
    check_transactional,
)
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message, MessageExt
from tidemq.common.message_id import offset_message_id
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    decode_header,
)
from tidemq.testing.waiting import eventually

BROKER = "10.0.0.1:10911"
HALF_COMMIT_LOG_OFFSET = 4242
HALF_QUEUE_OFFSET = 7
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
CheckHeader = CheckTransactionStateRequestHeader


def stored_half(request: RemotingCommand, code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    """A broker's answer to a half send: where it stored it, transactionId = UNIQ_KEY."""
    unique_key = props.decode_properties(request.ext_fields["i"])[props.UNIQ_KEY]
    fields = {
        "msgId": offset_message_id(bytes([10, 0, 0, 1]), 10911, HALF_COMMIT_LOG_OFFSET),
        "queueId": request.ext_fields["e"],
        "queueOffset": str(HALF_QUEUE_OFFSET),
        "transactionId": unique_key,
    }
    return RemotingCommand(code=code, flag=1, ext_fields=fields)


class FakeRemoting:
    def __init__(self) -> None:
        self.sends: list[RemotingCommand] = []
        self.answer_code = ResponseCode.SUCCESS

    async def invoke(
        self, address: str, command: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        self.sends.append(command)
        if self.answer_code in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            return stored_half(command, self.answer_code)
        return RemotingCommand(code=self.answer_code, flag=1, remark="refused")


class FakeInstance:
    """What AsyncTransactionProducer uses of a ClientInstance; END_TRANSACTIONs are recorded."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.config = ClientConfig(namesrv="127.0.0.1:1", client_ip="10.0.0.9", clock=self.clock)
        self.client_id = self.config.client_id
        self.remoting = FakeRemoting()
        self.oneways: list[tuple[str, int, dict[str, str]]] = []
        self.oneway_error: ClientError | None = None
        self.ended = asyncio.Event()
        self.heartbeats = 0
        self.route_requests: list[str] = []
        self.template_exists = True

    def register_producer(self, member: Any) -> None:
        self.member = member

    async def unregister(self, **groups: str | None) -> None:
        pass

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro)

    async def send_heartbeat(self) -> None:
        self.heartbeats += 1

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        self.route_requests.append(topic)
        if topic == "TBW102" and not self.template_exists:
            raise ClientError("no route for TBW102", ResponseCode.TOPIC_NOT_EXIST)
        return TopicRoute(
            topic, (QueueData("broker-a", 1, 1, 6),), (BrokerData("c", "broker-a", {0: BROKER}),)
        )

    async def require_master(self, broker_name: str, topic: str | None = None) -> str:
        return BROKER

    async def invoke_oneway(
        self, address: str, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        if self.oneway_error is not None:
            raise self.oneway_error
        self.oneways.append((address, code, dict(ext_fields or {})))
        self.ended.set()

    def end_headers(self) -> list[EndTransactionRequestHeader]:
        assert all(code == RequestCode.END_TRANSACTION for _, code, _ in self.oneways)
        return [decode_header(EndTransactionRequestHeader, f) for _, _, f in self.oneways]


class Listener:
    """Answers with scripted states (an exception is raised); records calls and threads."""

    def __init__(
        self, execute: object = COMMIT, check: object = COMMIT, *, asynchronous: bool = False
    ) -> None:
        self.execute = execute
        self.check = check
        self.executed: list[tuple[Message, Any]] = []
        self.checked: list[MessageExt] = []
        self.threads: list[threading.Thread] = []
        if asynchronous:
            self.execute_local_transaction = self._execute_async  # type: ignore[method-assign,assignment]
            self.check_local_transaction = self._check_async  # type: ignore[method-assign,assignment]

    def _answer(self, outcome: object) -> LocalTransactionState | None:
        self.threads.append(threading.current_thread())
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[return-value]

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState | None:
        self.executed.append((message, arg))
        return self._answer(self.execute)

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState | None:
        self.checked.append(message)
        return self._answer(self.check)

    async def _execute_async(self, message: Message, arg: Any) -> LocalTransactionState | None:
        self.executed.append((message, arg))
        return self._answer(self.execute)

    async def _check_async(self, message: MessageExt) -> LocalTransactionState | None:
        self.checked.append(message)
        return self._answer(self.check)


async def started(instance: FakeInstance, listener: Listener) -> AsyncTransactionProducer:
    producer = AsyncTransactionProducer(
        "TxGroup",
        client_instance=instance,  # type: ignore[arg-type]
        listener=listener,
    )
    await producer.start()
    return producer


# -- states and checks ------------------------------------------------------------------


def test_states_map_to_java_end_transaction_types() -> None:
    assert COMMIT.commit_or_rollback == sysflag.TRANSACTION_COMMIT_TYPE == 8
    assert ROLLBACK.commit_or_rollback == sysflag.TRANSACTION_ROLLBACK_TYPE == 12
    assert UNKNOW.commit_or_rollback == sysflag.TRANSACTION_NOT_TYPE == 0
    assert LocalTransactionState.UNKNOWN is UNKNOW
    assert LocalTransactionState["UNKNOW"] is UNKNOW


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({props.DELAY: "3"}, "delay level"),
        ({props.TIMER_DELIVER_MS: "1700000000000"}, props.TIMER_DELIVER_MS),
        ({props.TIMER_DELAY_MS: "500"}, props.TIMER_DELAY_MS),
        ({props.TIMER_DELAY_SEC: "5"}, props.TIMER_DELAY_SEC),
        ({props.START_DELIVER_TIME: "1700000000000"}, props.START_DELIVER_TIME),
    ],
)
def test_delay_and_delivery_times_are_refused(properties: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_transactional(Message("T", b"x", properties=dict(properties)))


def test_batches_and_non_messages_are_refused() -> None:
    with pytest.raises(ValueError, match="batch"):
        check_transactional([Message("T", b"x")])
    with pytest.raises(ValueError, match="batch"):
        check_transactional((Message("T", b"x"),))
    with pytest.raises(TypeError, match="str"):
        check_transactional("not a message")


def test_a_plain_message_and_delay_level_zero_pass() -> None:
    message = Message("T", b"x", properties={props.DELAY: "0"})
    assert check_transactional(message) is message


def test_constructor_refuses_bad_arguments() -> None:
    listener = Listener()
    with pytest.raises(ValueError, match="placeholder"):
        AsyncTransactionProducer("DEFAULT_PRODUCER", listener=listener)
    with pytest.raises(TypeError, match="execute_local_transaction"):
        AsyncTransactionProducer("G", listener=object())  # type: ignore[arg-type]

    class ExecuteOnly:
        def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
            return COMMIT

    with pytest.raises(TypeError, match="check_local_transaction"):
        AsyncTransactionProducer("G", listener=ExecuteOnly())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        AsyncTransactionProducer("G", listener=listener, check_thread_count=0)
    with pytest.raises(ValueError, match="at least 1"):
        AsyncTransactionProducer("G", listener=listener, check_request_hold_max=0)


async def test_refused_messages_cost_no_request() -> None:
    instance = FakeInstance()
    listener = Listener()
    producer = await started(instance, listener)
    for message in (
        Message("T", b"x", properties={props.DELAY: "2"}),
        Message("T", b"x", properties={props.TIMER_DELAY_SEC: "10"}),
    ):
        with pytest.raises(ValueError):
            await producer.send_message_in_transaction(message)
    with pytest.raises(ValueError):
        await producer.send_message_in_transaction([Message("T", b"x")])  # type: ignore[arg-type]
    assert instance.remoting.sends == [] and instance.oneways == [] and listener.executed == []
    await producer.shutdown()


@pytest.mark.parametrize("template_exists", [True, False])
async def test_start_makes_the_producer_known_to_the_brokers(template_exists: bool) -> None:
    instance = FakeInstance()
    instance.template_exists = template_exists
    producer = await started(instance, Listener())
    assert instance.route_requests == ["TBW102"]
    assert instance.heartbeats == 1
    await producer.shutdown()


# -- sending in a transaction ----------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_commit_after_send_ok(asynchronous: bool) -> None:
    instance = FakeInstance()
    listener = Listener(COMMIT, asynchronous=asynchronous)
    producer = await started(instance, listener)
    message = Message("T", b"order 1")
    result = await producer.send_message_in_transaction(message, arg={"order": 1})
    assert isinstance(result, TransactionSendResult)
    assert result.local_transaction_state is COMMIT and result.status is SendStatus.SEND_OK
    # The half: TRAN_MSG, PGROUP and the PREPARED sysflag.
    (sent,) = instance.remoting.sends
    sent_props = props.decode_properties(sent.ext_fields["i"])
    assert sent_props[props.TRAN_MSG] == "true" and sent_props[props.PGROUP] == "TxGroup"
    assert sysflag.transaction_value(int(sent.ext_fields["f"])) == sysflag.TRANSACTION_PREPARED
    # The listener saw the message it sent (with its unique key) and the arg.
    assert listener.executed == [(message, {"order": 1})]
    assert message.unique_key == result.msg_id == result.transaction_id
    on_loop = threading.current_thread()
    assert (listener.threads[0] is on_loop) is asynchronous
    # END_TRANSACTION names the half exactly.
    (address, _, _) = instance.oneways[0]
    (end,) = instance.end_headers()
    assert address == BROKER
    assert end == EndTransactionRequestHeader(
        producer_group="TxGroup",
        tran_state_table_offset=HALF_QUEUE_OFFSET,
        commit_log_offset=HALF_COMMIT_LOG_OFFSET,
        commit_or_rollback=8,
        from_transaction_check=False,
        msg_id=result.msg_id,
        transaction_id=result.msg_id,
        topic="T",
    )
    await producer.shutdown()


@pytest.mark.parametrize(
    ("outcome", "expected", "code"),
    [
        (ROLLBACK, ROLLBACK, 12),
        (UNKNOW, UNKNOW, 0),
        (None, UNKNOW, 0),
        ("COMMIT", UNKNOW, 0),
        (RuntimeError("database down"), UNKNOW, 0),
    ],
)
async def test_listener_outcomes(
    outcome: object, expected: LocalTransactionState, code: int
) -> None:
    instance = FakeInstance()
    producer = await started(instance, Listener(outcome))
    result = await producer.send_message_in_transaction(Message("T", b"x"))
    assert result.local_transaction_state is expected
    assert [end.commit_or_rollback for end in instance.end_headers()] == [code]
    await producer.shutdown()


async def test_a_half_not_stored_send_ok_is_rolled_back_without_the_listener() -> None:
    instance = FakeInstance()
    instance.remoting.answer_code = ResponseCode.FLUSH_DISK_TIMEOUT
    listener = Listener(COMMIT)
    producer = await started(instance, listener)
    result = await producer.send_message_in_transaction(Message("T", b"x"))
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert result.local_transaction_state is ROLLBACK
    assert listener.executed == []
    assert [end.commit_or_rollback for end in instance.end_headers()] == [12]
    await producer.shutdown()


async def test_a_refused_send_raises_and_ends_nothing() -> None:
    instance = FakeInstance()
    instance.remoting.answer_code = ResponseCode.MESSAGE_ILLEGAL
    listener = Listener(COMMIT)
    producer = await started(instance, listener)
    with pytest.raises(ClientError) as excinfo:
        await producer.send_message_in_transaction(Message("T", b"x"))
    assert excinfo.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert listener.executed == [] and instance.oneways == []
    await producer.shutdown()


async def test_a_lost_end_transaction_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    instance = FakeInstance()
    instance.oneway_error = ClientError("connection reset", ResponseCode.RPC_SEND_TO_CHANNEL_FAILED)
    producer = await started(instance, Listener(COMMIT))
    result = await producer.send_message_in_transaction(Message("T", b"x"))
    assert result.local_transaction_state is COMMIT
    assert "the broker will check it" in caplog.text
    await producer.shutdown()


# -- checks from the broker ----------------------------------------------------------------


def check_request(
    unique_key: str = "UNIQ-1",
) -> tuple[MessageExt, CheckTransactionStateRequestHeader]:
    message = MessageExt(
        topic="T",
        body=b"x",
        properties={props.UNIQ_KEY: unique_key, props.PGROUP: "TxGroup", props.TRAN_MSG: "true"},
        msg_id="0A00000100002A9F0000000000001000",
        commit_log_offset=4096,
        queue_offset=31,
    )
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=31,
        commit_log_offset=4096,
        msg_id=unique_key,
        transaction_id=unique_key,
        offset_msg_id=message.msg_id,
        topic="T",
    )
    return message, header


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    ("outcome", "code"),
    [(COMMIT, 8), (ROLLBACK, 12), (UNKNOW, 0), (None, 0), (ValueError("lost"), 0)],
)
async def test_a_check_is_answered_from_the_check_listener(
    outcome: object, code: int, asynchronous: bool
) -> None:
    instance = FakeInstance()
    listener = Listener(execute=COMMIT, check=outcome, asynchronous=asynchronous)
    producer = await started(instance, listener)
    message, header = check_request()
    producer.check_transaction_state("10.0.0.2:10911", message, header)
    await asyncio.wait_for(instance.ended.wait(), 10)
    assert listener.checked == [message]
    assert (listener.threads[0] is threading.current_thread()) is asynchronous
    ((address, _, _),) = instance.oneways
    assert address == "10.0.0.2:10911"
    assert instance.end_headers() == [
        EndTransactionRequestHeader(
            producer_group="TxGroup",
            tran_state_table_offset=31,
            commit_log_offset=4096,
            commit_or_rollback=code,
            from_transaction_check=True,
            msg_id="UNIQ-1",
            transaction_id="UNIQ-1",
            topic="T",
        )
    ]
    await producer.shutdown()


async def test_checks_beyond_the_hold_limit_are_dropped() -> None:
    instance = FakeInstance()
    gate = threading.Event()

    class Blocking(Listener):
        def check_local_transaction(self, message: MessageExt) -> LocalTransactionState | None:
            gate.wait(10)
            return super().check_local_transaction(message)

    listener = Blocking()
    producer = AsyncTransactionProducer(
        "TxGroup",
        client_instance=instance,  # type: ignore[arg-type]
        listener=listener,
        check_request_hold_max=2,
    )
    await producer.start()
    for key in ("A", "B", "C"):
        producer.check_transaction_state(BROKER, *check_request(key))
    gate.set()
    await eventually(lambda: len(instance.oneways) >= 2, "two answers", timeout=10)
    assert sorted(h.msg_id for h in instance.end_headers()) == ["A", "B"]
    await producer.shutdown()


async def test_checks_after_shutdown_are_ignored() -> None:
    instance = FakeInstance()
    listener = Listener()
    producer = await started(instance, listener)
    await producer.shutdown()
    producer.check_transaction_state(BROKER, *check_request())
    assert len(producer._checks) == 0
    assert listener.checked == [] and instance.oneways == []
