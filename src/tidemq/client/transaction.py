"""Transactional messages: `AsyncTransactionProducer` and its blocking twin
`TransactionProducer` (Java's TransactionMQProducer, RocketMQ 4.x protocol).

`send_message_in_transaction(message, arg)`:

1. the message is checked (no delay level, no delivery time, no batch:
   ValueError before any I/O), marked TRAN_MSG=true and PGROUP=<group>, and
   sent as a half message (sysflag PREPARED) with the ordinary send path, so
   the broker keeps it out of sight;
2. on SEND_OK the listener's `execute_local_transaction(message, arg)` runs;
   an exception or a result that is not a state counts as UNKNOW (Java logs
   and does the same); any other send status means ROLLBACK and the listener
   is not called;
3. END_TRANSACTION goes oneway to the master that stored the half: commit (8),
   rollback (12) or unknown (0, the broker will ask later). Losing it is
   harmless for the same reason, so a failure there is only logged.

The broker asks about halves nobody ended (CHECK_TRANSACTION_STATE, first
after its transaction timeout, 6 s) of any live producer of the group, so a
producer that crashed mid-transaction is asked on another one. The
ClientInstance hands the check to `check_transaction_state`; the listener's
`check_local_transaction(message)` runs and the answer goes back oneway,
marked fromTransactionCheck.

Listener methods may be plain functions (run in thread pools:
`execute_thread_count` threads for executions, `check_thread_count`, Java's
1, for checks) or ``async def`` (run on the loop). At most
`check_request_hold_max` checks wait; more are dropped with a warning (Java
rejects them too): the broker asks again on its next scan. The transaction
id is the message's unique key (UNIQ_KEY, `message.unique_key`), which the
check message carries as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from tidemq.acl.credentials import Credentials
from tidemq.client._loop import BlockingClient
from tidemq.client._send import DEFAULT_PRODUCER_GROUP
from tidemq.client.consumer.listener import is_async_listener
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.client.model import SendResult, SendStatus
from tidemq.client.producer import AsyncProducer, Producer
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import Message, MessageExt
from tidemq.common.message_id import decode_offset_message_id
from tidemq.common.tasks import TaskSet
from tidemq.protocol import RequestCode, ResponseCode
from tidemq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    encode_header,
)
from tidemq.transport.tls import TlsConfig

__all__ = [
    "AsyncTransactionProducer",
    "LocalTransactionState",
    "ProducerOptions",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "check_transactional",
]

log = logging.getLogger(__name__)

DEFAULT_CHECK_THREAD_COUNT = 1
"""Java's checkThreadPoolMinSize / MaxSize."""
DEFAULT_CHECK_REQUEST_HOLD_MAX = 2000
"""Java's checkRequestHoldMax: checks waiting for a thread beyond this are dropped."""
DEFAULT_EXECUTE_THREAD_COUNT = 8

_TIMER_KEYS = (
    props.TIMER_DELIVER_MS,
    props.TIMER_DELAY_MS,
    props.TIMER_DELAY_SEC,
    props.START_DELIVER_TIME,
)


class ProducerOptions(TypedDict, total=False):
    """AsyncProducer's keyword arguments (defaults as there)."""

    send_timeout_s: float
    retry_times_when_send_failed: int
    retry_times_when_send_async_failed: int
    retry_another_broker_when_not_store_ok: bool
    compress_over_bytes: int
    max_message_size: int
    send_latency_fault_enable: bool
    create_topic_key: str
    default_topic_queue_nums: int
    instance_name: str | None
    client_config: ClientConfig | None
    credentials: Credentials | None
    tls: bool | TlsConfig | None
    client_instance: ClientInstance | None
    """Async only: a started ClientInstance shared with its owner."""
    enable_trace: bool
    """Trace the half messages (Pub) and the transactions' ends (EndTransaction)."""
    trace_topic: str


class LocalTransactionState(enum.Enum):
    """What the local transaction came to (Java's names; UNKNOWN is an alias of UNKNOW)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION `commitOrRollback` value (a MessageSysFlag transaction type)."""
        return _END_TYPES[self]


_END_TYPES = {
    LocalTransactionState.COMMIT_MESSAGE: sysflag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: sysflag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: sysflag.TRANSACTION_NOT_TYPE,
}

_StateResult = LocalTransactionState | None | Awaitable[LocalTransactionState | None]


class TransactionListener(Protocol):
    """The application's side of a transaction (Java's TransactionListener).

    Either method may be ``async def``; plain methods run in a thread pool.
    Returning None, or raising, means UNKNOW: the broker asks again later.
    """

    def execute_local_transaction(self, message: Message, arg: Any) -> _StateResult:
        """Run the local transaction of the half message just stored."""
        ...

    def check_local_transaction(self, message: MessageExt) -> _StateResult:
        """Say how the transaction of `message` ended (the broker asks)."""
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """The half message's SendResult and what the local transaction came to."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def check_transactional(message: object) -> Message:
    """`message` if it can be sent in a transaction, else ValueError (TypeError
    for what is not a Message at all). RocketMQ cannot delay or batch a half
    message, so these are refused before anything is sent."""
    if isinstance(message, Sequence) and not isinstance(message, str | bytes):
        raise ValueError(
            "a batch cannot be sent in a transaction: send each message with "
            "send_message_in_transaction"
        )
    if not isinstance(message, Message):
        raise TypeError(
            f"send_message_in_transaction takes a tidemq Message, not {type(message).__name__}"
        )
    delay = message.properties.get(props.DELAY, "").strip()
    if delay not in ("", "0"):
        raise ValueError(
            f"a transactional message cannot have a delay level (delay level {delay}); "
            "send it without one"
        )
    timer = next((key for key in _TIMER_KEYS if key in message.properties), None)
    if timer is not None:
        raise ValueError(
            f"a transactional message cannot have a delivery time (property {timer}); "
            "send it without one"
        )
    return message


def _check_listener(listener: object) -> TransactionListener:
    for method in ("execute_local_transaction", "check_local_transaction"):
        if not callable(getattr(listener, method, None)):
            raise TypeError(
                f"the transaction listener {listener!r} has no {method}() method "
                "(see tidemq.TransactionListener)"
            )
    return listener  # type: ignore[return-value]


def _as_state(result: object, what: str) -> LocalTransactionState:
    """A listener's return value as a state: anything else is UNKNOW (logged)."""
    if isinstance(result, LocalTransactionState):
        return result
    if result is not None:
        log.warning("%s returned %r, not a LocalTransactionState: UNKNOW", what, result)
    return LocalTransactionState.UNKNOW


class AsyncTransactionProducer(AsyncProducer):
    """An AsyncProducer that also sends messages in transactions (see the module docstring).

    `group` names the producers the broker may ask about a transaction: every
    producer of the group must be able to answer `check_local_transaction`.
    The remaining keyword arguments are AsyncProducer's.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        listener: TransactionListener,
        execute_thread_count: int = DEFAULT_EXECUTE_THREAD_COUNT,
        check_thread_count: int = DEFAULT_CHECK_THREAD_COUNT,
        check_request_hold_max: int = DEFAULT_CHECK_REQUEST_HOLD_MAX,
        **options: Unpack[ProducerOptions],
    ) -> None:
        if group == DEFAULT_PRODUCER_GROUP:
            raise ValueError(
                f"{DEFAULT_PRODUCER_GROUP} is a placeholder: a transactional producer needs "
                "its own group (the broker checks transactions with the group's producers)"
            )
        if execute_thread_count < 1 or check_thread_count < 1:
            raise ValueError("execute_thread_count and check_thread_count must be at least 1")
        if check_request_hold_max < 1:
            raise ValueError("check_request_hold_max must be at least 1")
        self.listener = _check_listener(listener)
        super().__init__(group, namesrv, **options)
        self.check_request_hold_max = check_request_hold_max
        self._execute_pool = ThreadPoolExecutor(
            max_workers=execute_thread_count, thread_name_prefix=f"tidemq-transaction-{group}"
        )
        self._check_pool = ThreadPoolExecutor(
            max_workers=check_thread_count, thread_name_prefix=f"tidemq-check-{group}"
        )
        self._checks = TaskSet(f"producer {group} transaction checks")

    async def start(self) -> None:
        """Start as AsyncProducer, then make this producer known to the brokers at
        once (Java's producer does within a second: the TBW102 route names them,
        then a heartbeat), so the broker can check transactions with it even
        before it sends anything, e.g. for a crashed producer of its group."""
        await super().start()
        with contextlib.suppress(ClientError):
            await self.client_instance.route(self._create_topic_key)
        await self.client_instance.send_heartbeat()

    async def shutdown(self) -> None:
        """Drop pending checks (the broker asks again), then shut down as AsyncProducer."""
        try:
            await self._checks.cancel_all()
        finally:
            self._execute_pool.shutdown(wait=False, cancel_futures=True)
            self._check_pool.shutdown(wait=False, cancel_futures=True)
            await super().shutdown()

    # -- sending ------------------------------------------------------------------------

    async def send_message_in_transaction(
        self, message: Message, arg: Any = None, *, timeout_s: float | None = None
    ) -> TransactionSendResult:
        """Send `message` as a half message, run the local transaction, end it.

        A send that fails raises ClientError (nothing was stored, the listener
        is not called). Returns the send result with the state the local
        transaction reported (ROLLBACK_MESSAGE when the half was not stored
        SEND_OK)."""
        check_transactional(message)
        self._check_running()
        message.properties[props.TRAN_MSG] = "true"
        message.properties[props.PGROUP] = self.group
        result = await self.send(message, timeout_s=timeout_s)
        transaction_id = result.transaction_id or result.msg_id
        if result.status == SendStatus.SEND_OK:
            execute = self.listener.execute_local_transaction
            state = await self._run_listener(
                functools.partial(execute, message, arg),
                self._execute_pool,
                f"execute_local_transaction of {transaction_id}",
                is_async=is_async_listener(execute),
            )
        else:
            log.info(
                "%s: half message %s stored %s: rolled back without the local transaction",
                self.group,
                result.msg_id,
                result.status,
            )
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(message, result, transaction_id, state)
        except ClientError as exc:
            log.warning(
                "%s: local transaction %s ended %s, but telling the broker failed (%s); "
                "the broker will check it",
                self.group,
                transaction_id,
                state.value,
                exc,
            )
        return TransactionSendResult(
            status=result.status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            topic=result.topic,
            broker_name=result.broker_name,
            queue_id=result.queue_id,
            queue_offset=result.queue_offset,
            transaction_id=transaction_id,
            recall_handle=result.recall_handle,
            region_id=result.region_id,
            trace_on=result.trace_on,
            local_transaction_state=state,
        )

    async def _end_transaction(
        self,
        message: Message,
        result: SendResult,
        transaction_id: str,
        state: LocalTransactionState,
    ) -> None:
        """END_TRANSACTION (oneway) to the master that stored the half."""
        try:
            commit_log_offset = decode_offset_message_id(result.offset_msg_id)[2]
        except ValueError as exc:
            raise ClientError(
                f"cannot locate the half message: {exc}", ResponseCode.SYSTEM_ERROR
            ) from None
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=False,
            msg_id=result.msg_id,
            transaction_id=transaction_id,
            topic=result.topic,
        )
        address = await self.client_instance.require_master(result.broker_name, result.topic)
        if self.tracer is not None:  # Java's EndTransactionTraceHookImpl runs before the request
            self.tracer.transaction_ended(
                message,
                result.msg_id,
                transaction_id,
                state.value,
                from_check=False,
                broker_address=address,
            )
        await self.client_instance.invoke_oneway(
            address, RequestCode.END_TRANSACTION, encode_header(header)
        )

    # -- checks from brokers ------------------------------------------------------------

    def check_transaction_state(
        self,
        broker_address: str,
        message: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) -> None:
        """Called by the ClientInstance for CHECK_TRANSACTION_STATE: answer it in the background."""
        if self._state != "running":
            log.info("%s: shutting down; check of %s ignored", self.group, header.transaction_id)
            return
        if len(self._checks) >= self.check_request_hold_max:
            log.warning(
                "%s: %d transaction checks are waiting; check of %s dropped (asked again later)",
                self.group,
                len(self._checks),
                header.transaction_id,
            )
            return
        self._checks.spawn(self._answer_check(broker_address, message, header))

    async def _answer_check(
        self,
        broker_address: str,
        message: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) -> None:
        unique_key = message.properties.get(props.UNIQ_KEY) or message.msg_id
        check = self.listener.check_local_transaction
        state = await self._run_listener(
            functools.partial(check, message),
            self._check_pool,
            f"check_local_transaction of {unique_key}",
            is_async=is_async_listener(check),
        )
        answer = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=True,
            msg_id=unique_key,
            transaction_id=header.transaction_id,
            topic=message.topic,
        )
        if self.tracer is not None:
            self.tracer.transaction_ended(
                message,
                unique_key,
                header.transaction_id,
                state.value,
                from_check=True,
                broker_address=broker_address,
            )
        try:
            await self.client_instance.invoke_oneway(
                broker_address, RequestCode.END_TRANSACTION, encode_header(answer)
            )
        except ClientError as exc:
            log.warning("%s: answering the check of %s failed: %s", self.group, unique_key, exc)
            return
        log.debug("%s: check of %s answered %s", self.group, unique_key, state.value)

    async def _run_listener(
        self,
        call: Callable[[], object],
        pool: ThreadPoolExecutor,
        what: str,
        *,
        is_async: bool,
    ) -> LocalTransactionState:
        """Run a listener method (plain: in `pool`; async: here) for its state;
        an exception is logged and means UNKNOW (as Java)."""
        try:
            if is_async:
                result = call()
            else:
                result = await asyncio.get_running_loop().run_in_executor(pool, call)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            log.exception("%s: %s failed: UNKNOW", self.group, what)
            return LocalTransactionState.UNKNOW
        return _as_state(result, what)


class TransactionProducer(Producer):
    """The blocking transactional producer: AsyncTransactionProducer on a loop thread.

    Same arguments as AsyncTransactionProducer. Plain listener methods run in
    the producer's thread pools, never in the thread that called
    `send_message_in_transaction`.
    """

    _transactions: AsyncTransactionProducer

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] = "127.0.0.1:9876",
        *,
        listener: TransactionListener,
        execute_thread_count: int = DEFAULT_EXECUTE_THREAD_COUNT,
        check_thread_count: int = DEFAULT_CHECK_THREAD_COUNT,
        check_request_hold_max: int = DEFAULT_CHECK_REQUEST_HOLD_MAX,
        **options: Unpack[ProducerOptions],
    ) -> None:
        if "client_instance" in options:
            raise ValueError("a blocking producer owns its client instance")
        build = functools.partial(
            AsyncTransactionProducer,
            group,
            namesrv,
            listener=listener,
            execute_thread_count=execute_thread_count,
            check_thread_count=check_thread_count,
            check_request_hold_max=check_request_hold_max,
            **options,
        )
        BlockingClient.__init__(self, build, thread_name=f"tidemq-producer-{group}")
        core = self._core
        assert isinstance(core, AsyncTransactionProducer)
        self._transactions = core

    def send_message_in_transaction(
        self, message: Message, arg: Any = None, *, timeout_s: float | None = None
    ) -> TransactionSendResult:
        check_transactional(message)
        return self._run(
            self._transactions.send_message_in_transaction(message, arg, timeout_s=timeout_s)
        )
