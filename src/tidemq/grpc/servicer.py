"""MessagingService over the broker's processors: every RPC the official 5.x clients use.

Each method decodes the request, calls the broker's processors
(tidemq.broker.processors: send, pull, pop, transaction, client: the same
objects and checks the remoting codes go through), and answers with a
`Status` inside the response (gRPC status stays OK, as the Java proxy does).
Every RPC that names a topic or group is marked `_names_checked`: the
proxy's name check comes first. The facts this follows are
in `shared/design/protocol-grpc.md`: routes echo the client's endpoints and
always contain queue 0; the client's queue choice is a hint (a FIFO message
goes to the queue its group hashes to, others round-robin); receives pop
from every queue of the topic; long polls end before the client's deadline.
Where the Java proxy answers a refusal with a text of its own, the status
carries that text (clients match on some), and it checks what it checks
before the broker does (an expired receipt handle, a blank transaction id).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tidemq.broker.assembly import BrokerCore
from tidemq.broker.config import BrokerConfig
from tidemq.broker.groups import SubscriptionGroupManager
from tidemq.broker.permission import ALL_PERMISSIONS, BrokerPermission
from tidemq.broker.pop.api import (
    ALL_QUEUES,
    MAX_INVISIBLE_MS,
    PopRequest,
    ReceiptHandleError,
)
from tidemq.broker.pop.receipts import parse_receipt_handle
from tidemq.broker.processors.client import ClientProcessor
from tidemq.broker.processors.pop import PopProcessor
from tidemq.broker.processors.pull import PullProcessor
from tidemq.broker.processors.send import SendProcessor
from tidemq.broker.processors.transaction import TransactionProcessor
from tidemq.broker.requests import BrokerError, PullRequest, SendRequest
from tidemq.broker.topics import TopicConfigManager, is_readable, is_writeable
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.clock import Clock
from tidemq.grpc.cluster_routes import BrokerQueues, ClusterRoutes, endpoints_of
from tidemq.grpc.convert import (
    Code,
    ConvertError,
    MessageType,
    code_for,
    decode_legacy_transaction_id,
    delivered_message,
    duration_ms,
    millis_of,
    name_problem,
    send_properties,
    status,
    timestamp_of,
    topic_not_found,
)
from tidemq.grpc.renewal import ReceiptRenewals, RenewalSettings
from tidemq.grpc.telemetry import TelemetryConnection, TelemetrySession, settings_reply
from tidemq.protocol.codes import ResponseCode
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import EndTransactionRequestHeader
from tidemq.protocol.heartbeat import HeartbeatData
from tidemq.protocol.versions import version_ordinal
from tidemq.record.codec import decode_record
from tidemq.record.records import decode_records

log = logging.getLogger(__name__)

_STORED_WITHOUT_DURABILITY: dict[int, tuple[int, str]] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: (Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    ResponseCode.SLAVE_NOT_AVAILABLE: (Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
}
"""The proxy's answers for a message stored without the durability asked for."""

ACCEPTED_TYPES = (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION)
DEADLINE_MARGIN_S = 1.0
DEFAULT_POLL_S = 20.0
MAX_POLL_S = 30.0
TRANSACTION_COMMIT = 8
TRANSACTION_ROLLBACK = 12
CLIENT_ID_HEADER = "x-mq-client-id"


def _client_id(context: grpc.aio.ServicerContext[Any, Any] | None) -> str:
    """The client's x-mq-client-id ("" when it sent none, or with no context)."""
    if context is None:
        return ""
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER:
            return str(value)
    return ""


def invisible_problem(invisible_ms: int, min_ms: int) -> None:
    """ILLEGAL_INVISIBLE_TIME in the proxy's words for an invisible time out of
    [min_ms, 12 h] (GrpcValidator.validateInvisibleTime, GrpcValidator.java:89-100)."""
    if invisible_ms < min_ms:
        raise ConvertError(
            Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}"
        )
    if invisible_ms > MAX_INVISIBLE_MS:
        raise ConvertError(
            Code.ILLEGAL_INVISIBLE_TIME,
            f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}",
        )


def _enum_label(enum: Any, value: int) -> str:
    """A protobuf enum value's name lower-cased; the number when it has none."""
    try:
        return str(enum.Name(value)).lower()
    except ValueError:
        return str(value)


def fifo_queue(message_group: str, queue_nums: int) -> int:
    """A message group's queue: stable across restarts and processes."""
    return zlib.crc32(message_group.encode()) % max(1, queue_nums)


_Unary = Callable[[Any, Any, Any], Awaitable[Any]]
_Streaming = Callable[[Any, Any, Any], AsyncIterator[Any]]


def _names_checked(response_type: Any) -> Callable[[_Unary], _Unary]:
    """The topic/group name check in front of a unary RPC that names them: a
    refused request gets the RPC's response (`response_type`) with the status alone."""

    def wrap(method: _Unary) -> _Unary:
        @functools.wraps(method)
        async def checked(self: Any, request: Any, context: Any) -> Any:
            problem = name_problem(request)
            if problem is not None:
                return response_type(status=status(*problem))
            return await method(self, request, context)

        return checked

    return wrap


def _names_checked_stream(response_type: Any) -> Callable[[_Streaming], _Streaming]:
    """`_names_checked` for a server-streaming RPC: the refusal is its one response."""

    def wrap(method: _Streaming) -> _Streaming:
        @functools.wraps(method)
        async def checked(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
            problem = name_problem(request)
            if problem is not None:
                yield response_type(status=status(*problem))
                return
            async for response in method(self, request, context):
                yield response

        return checked

    return wrap


class MessagingServicer(service_pb2_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """The apache.rocketmq.v2.MessagingService of one broker."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        *,
        send: SendProcessor,
        pull: PullProcessor,
        pop: PopProcessor,
        transaction: TransactionProcessor,
        client: ClientProcessor,
        real_peer: Callable[[str], str] | None = None,
        permission: BrokerPermission | None = None,
        routes: ClusterRoutes | None = None,
    ) -> None:
        """`real_peer`: grpc's peer string -> the client's, behind the TLS front
        (RelayedPeers.real); default as is."""
        self.config = config
        self.clock = clock
        self.topics = topics
        self.permission = permission or BrokerPermission(ALL_PERMISSIONS, config.advertised_host)
        """brokerPermission: routes show each queue's permission masked by it."""
        self.routes = routes
        """The cluster's routes (every broker's queues at its own endpoint); None:
        this broker's queues only."""
        self.groups = groups
        self.send = send
        self.pull = pull
        self.pop = pop
        self.transaction = transaction
        self.client = client
        self.real_peer = real_peer
        self._sessions: dict[str, list[TelemetrySession]] = {}
        self._round_robin = itertools.count()
        self.renewals = ReceiptRenewals(
            RenewalSettings(
                enabled=config.grpc_auto_renew,
                default_invisible_ms=config.grpc_default_invisible_ms,
                ahead_ms=config.grpc_renew_ahead_ms,
                period_ms=config.grpc_renew_period_ms,
                max_ms=config.grpc_renew_max_ms,
            ),
            clock,
            pop.change_invisible,
            lambda client_id: bool(self._sessions.get(client_id)),
        )
        """Push consumers' auto-renewed messages (grpc/renewal.py)."""

    @classmethod
    def of(
        cls,
        core: BrokerCore,
        real_peer: Callable[[str], str] | None = None,
        routes: ClusterRoutes | None = None,
    ) -> MessagingServicer:
        """The servicer over an assembled broker's processors."""
        service = core.service
        return cls(
            service.config,
            service.clock,
            service.topics,
            service.groups,
            send=core.send,
            pull=core.pull,
            pop=core.pop,
            transaction=core.transaction,
            client=core.client,
            real_peer=real_peer,
            permission=service.permission,
            routes=routes,
        )

    def _peer(self, context: Any) -> str:
        """The client's peer string (grpc's, or the real one behind the TLS front)."""
        peer = str(context.peer())
        return self.real_peer(peer) if self.real_peer is not None else peer

    def consumer_sessions(self) -> list[tuple[str, str, str, str]]:
        """(group, language, version, client type) of every consumer's open
        Telemetry stream, names lower-cased ("python", "5.0.1", "simple_consumer")."""
        found = []
        for sessions in list(self._sessions.values()):
            for session in sessions:
                settings = session.settings
                if settings is None or not settings.HasField("subscription"):
                    continue
                agent = settings.user_agent
                found.append(
                    (
                        settings.subscription.group.name,
                        _enum_label(pb.Language, agent.language),
                        agent.version,
                        _enum_label(pb.ClientType, settings.client_type),
                    )
                )
        return found

    def close_sessions(self) -> None:
        """End every Telemetry stream (the server is stopping)."""
        for sessions in list(self._sessions.values()):
            for session in list(sessions):
                session.close()

    async def stop_renewing(self) -> None:
        """Stop renewing held messages; they come back to other consumers soon."""
        await self.renewals.close()

    # -- helpers ---------------------------------------------------------------------

    def _topic(self, name: str) -> Any:
        config = self.topics.get(name)
        if config is None:
            raise topic_not_found(name)
        return config

    def _check_not_expired(self, receipt_handle: str) -> None:
        """The proxy's check before an ack or a change of invisible time
        (AbstractProcessor.validateReceiptHandle, AbstractProcessor.java:30-42;
        ReceiptHandle.isExpired, ReceiptHandle.java:49-51): a handle whose
        invisible time is over is refused, whatever the broker would say."""
        handle = parse_receipt_handle(receipt_handle)
        if handle.due_ms <= self.clock.now_ms():
            raise ReceiptHandleError("receipt handle is expired")

    async def _cluster_queues(self, topic: str) -> list[BrokerQueues] | None:
        """Every broker's queues of `topic` (None: ask this broker alone)."""
        if self.routes is None:
            return None
        return await self.routes.queues(topic)

    def _reachable(
        self, across: list[BrokerQueues], own: pb.Endpoints
    ) -> Iterator[tuple[BrokerQueues, pb.Endpoints]]:
        """Each broker with the endpoints a client reaches it at: this broker's as
        the client dialled it, another's at the address it gives."""
        for broker in across:
            if broker.grpc_address is None:
                yield broker, own
            else:
                yield broker, endpoints_of(broker.grpc_address)

    def _queue(
        self,
        topic: str,
        queue_id: int,
        endpoints: pb.Endpoints,
        perm: int,
        broker_name: str | None = None,
        *,
        masked: bool = False,
    ) -> Any:
        """A MessageQueue of `broker_name` (default this broker); `masked`: `perm`
        comes from a route, where each broker's brokerPermission is applied."""
        if not masked:
            perm = self.permission.mask(perm)  # brokerPermission, as the name server's routes
        permission = pb.Permission.NONE
        if is_readable(perm) and is_writeable(perm):
            permission = pb.Permission.READ_WRITE
        elif is_readable(perm):
            permission = pb.Permission.READ
        elif is_writeable(perm):
            permission = pb.Permission.WRITE
        return pb.MessageQueue(
            topic=pb.Resource(name=topic),
            id=queue_id,
            permission=permission,
            broker=pb.Broker(
                name=broker_name or self.config.broker_name, id=0, endpoints=endpoints
            ),
            accept_message_types=self._accepted_types(topic),
        )

    def _declared_type(self, topic: str) -> str:
        """The topic's `message.type` attribute (RocketMQ's TopicMessageType), MIXED if none."""
        config = self.topics.get(topic)
        attributes = config.attributes if config is not None else {}
        return str(attributes.get("message.type", "")).upper() or "MIXED"

    def _accepted_types(self, topic: str) -> list[int]:
        declared = self._declared_type(topic)
        if declared in ("NORMAL", "FIFO", "DELAY", "TRANSACTION"):
            return [int(MessageType.Value(declared))]
        return list(ACCEPTED_TYPES)

    # -- routes and clients -----------------------------------------------------------

    @_names_checked(spb.QueryRouteResponse)
    async def QueryRoute(self, request: Any, context: Any) -> Any:
        across = await self._cluster_queues(request.topic.name)
        if across:
            queues = [
                self._queue(
                    request.topic.name, qid, endpoints, broker.perm, broker.broker_name, masked=True
                )
                for broker, endpoints in self._reachable(across, request.endpoints)
                for qid in range(max(broker.read_queue_nums, broker.write_queue_nums))
            ]
            return spb.QueryRouteResponse(status=status(), message_queues=queues)
        try:
            config = self._topic(request.topic.name)
        except ConvertError as exc:
            return spb.QueryRouteResponse(status=status(exc.code, exc.message))
        queues = [
            self._queue(config.topic_name, qid, request.endpoints, config.perm)
            for qid in range(config.queue_nums)
        ]
        return spb.QueryRouteResponse(status=status(), message_queues=queues)

    @_names_checked(spb.HeartbeatResponse)
    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return spb.HeartbeatResponse(status=status())

    @_names_checked(spb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        client_id = _client_id(context)
        for session in self._sessions.pop(client_id, []):
            self._unregister(session)
        return spb.NotifyClientTerminationResponse(status=status())

    @_names_checked(spb.QueryAssignmentResponse)
    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        fifo = self.pop.is_fifo(request.group.name)
        across = await self._cluster_queues(request.topic.name)
        if across:
            assignments = [
                pb.Assignment(
                    message_queue=self._queue(
                        request.topic.name,
                        qid,
                        endpoints,
                        broker.perm,
                        broker.broker_name,
                        masked=True,
                    )
                )
                for broker, endpoints in self._reachable(across, request.endpoints)
                if is_readable(broker.perm)
                for qid in (range(broker.read_queue_nums) if fifo else [0])
            ]
            return spb.QueryAssignmentResponse(status=status(), assignments=assignments)
        try:
            config = self._topic(request.topic.name)
        except ConvertError as exc:
            return spb.QueryAssignmentResponse(status=status(exc.code, exc.message))
        ids = range(config.read_queue_nums) if fifo else [0]
        assignments = [
            pb.Assignment(
                message_queue=self._queue(config.topic_name, qid, request.endpoints, config.perm)
            )
            for qid in ids
        ]
        return spb.QueryAssignmentResponse(status=status(), assignments=assignments)

    # -- telemetry ---------------------------------------------------------------------

    async def Telemetry(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        session = TelemetrySession(_client_id(context), self._peer(context))
        self._sessions.setdefault(session.client_id, []).append(session)
        reader = asyncio.ensure_future(self._read_telemetry(session, request_iterator))
        try:
            while True:
                command = await session.outbox.get()
                if command is None:
                    break
                yield command
        finally:
            reader.cancel()
            session.close()
            self._unregister(session)
            sessions = self._sessions.get(session.client_id, [])
            if session in sessions:
                sessions.remove(session)
            if not sessions:
                self._sessions.pop(session.client_id, None)

    async def _read_telemetry(
        self, session: TelemetrySession, requests: AsyncIterator[Any]
    ) -> None:
        try:
            async for command in requests:
                if command.HasField("settings"):
                    session.push(self._settings_command(session, command.settings))
        except (asyncio.CancelledError, grpc.aio.AioRpcError):
            pass
        except Exception:
            log.exception("telemetry stream of %s failed", session.client_id)
        finally:
            session.close()

    def _settings_command(self, session: TelemetrySession, settings: pb.Settings) -> Any:
        session.settings = settings
        fifo = False
        max_attempts = self.config.max_reconsume_times + 1
        if settings.HasField("subscription"):
            group = settings.subscription.group.name
            fifo = self.pop.is_fifo(group)
            config = self.groups.get(group)
            if config is not None:
                max_attempts = config.retry_max_times + 1
        elif settings.HasField("publishing"):
            # a publishing client is a producer of each of its topics (the group
            # a gRPC producer sends as), registered as a remoting heartbeat would
            producer_groups = tuple(topic.name for topic in settings.publishing.topics)
            self.client.heartbeat(
                HeartbeatData(session.client_id, producer_groups=producer_groups),
                TelemetryConnection(session),
                language=_enum_label(pb.Language, settings.user_agent.language).upper(),
                version=version_ordinal(settings.user_agent.version),
            )
        reply = settings_reply(
            settings,
            max_body_size=self.send.max_message_size,
            fifo=fifo,
            max_attempts=max_attempts,
        )
        return spb.TelemetryCommand(status=status(), settings=reply)

    def _unregister(self, session: TelemetrySession) -> None:
        settings = session.settings
        if settings is not None and settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                self.client.unregister_client(session.client_id, topic.name, None)

    # -- send --------------------------------------------------------------------------

    @_names_checked(spb.SendMessageResponse)
    async def SendMessage(self, request: Any, context: Any) -> Any:
        if not request.messages:  # SendMessageActivity.java:70-72
            return spb.SendMessageResponse(
                status=status(Code.MESSAGE_CORRUPTED, "no message to send")
            )
        sent = [await self._send_one(message) for message in request.messages]
        entries = [entry for entry, _ in sent]
        if len(sent) == 1 and sent[0][1]:
            top = entries[0].status  # a refusal: the proxy answers its text
        else:
            codes = {entry.status.code for entry in entries}
            if len(codes) == 1:
                top = status(codes.pop())
            elif codes:
                top = status(Code.MULTIPLE_RESULTS)
            else:
                top = status(Code.INTERNAL_SERVER_ERROR, "send status is empty")
        return spb.SendMessageResponse(status=top, entries=entries)

    async def _send_one(self, message: Any) -> tuple[Any, bool]:
        """The entry for one message, and whether it was refused before storing.

        A stored message's transaction_id is its UNIQ_KEY, for every type, as
        RocketMQ answers (SendMessageProcessor.java:486 puts it in the send
        response, SendMessageActivity.java:343 passes it on)."""
        message_id = message.system_properties.message_id
        try:
            config = self._topic(message.topic.name)
            if not message.body:
                raise ConvertError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
            limit = self.send.max_message_size
            if len(message.body) > limit:
                raise ConvertError(
                    Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}"
                )
            allowed = self._accepted_types(config.topic_name)
            kind = message.system_properties.message_type or MessageType.NORMAL
            if kind not in allowed:
                raise ConvertError(
                    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    "TopicMessageType validate failed, the expected type is "
                    f"{self._declared_type(config.topic_name)}, "
                    f"but actual type is {MessageType.Name(kind)}",
                )
            producer_group = config.topic_name
            properties = send_properties(message, producer_group)
            write_queues = max(1, config.write_queue_nums)
            if props.SHARDING_KEY in properties:
                queue_id = fifo_queue(properties[props.SHARDING_KEY], write_queues)
            else:
                queue_id = next(self._round_robin) % write_queues
            born_ms = millis_of(message.system_properties.born_timestamp)
            transactional = kind == MessageType.TRANSACTION
            result = await self.send.send(
                SendRequest(
                    producer_group=producer_group,
                    topic=config.topic_name,
                    queue_id=queue_id,
                    body=message.body,
                    properties=props.encode_properties(properties),
                    sys_flag=sysflag.TRANSACTION_PREPARED_TYPE if transactional else 0,
                    born_timestamp=born_ms or self.clock.now_ms(),
                )
            )
        except ConvertError as exc:
            refused = spb.SendResultEntry(
                status=status(exc.code, exc.message), message_id=message_id
            )
            return refused, True
        except BrokerError as exc:
            refused = spb.SendResultEntry(
                status=status(code_for(exc, "send"), exc.remark), message_id=message_id
            )
            return refused, True
        stored_only = _STORED_WITHOUT_DURABILITY.get(result.code)
        if stored_only is not None:
            # SendMessageActivity.java:323-337: stored, not known durable
            # (flushed, or on a slave), answered with the send status's name.
            code, name = stored_only
            return spb.SendResultEntry(
                status=status(code, f"send message failed, sendStatus={name}")
            ), False
        entry = spb.SendResultEntry(
            status=status(),
            message_id=message_id,
            transaction_id=message_id,
            offset=result.queue_offset,
        )
        if result.recall_handle:
            entry.recall_handle = result.recall_handle
        return entry, False

    @_names_checked(spb.EndTransactionResponse)
    async def EndTransaction(self, request: Any, context: Any) -> Any:
        try:
            header = self._end_header(request)
            await self.transaction.end_transaction(header)
        except ConvertError as exc:
            return spb.EndTransactionResponse(status=status(exc.code, exc.message))
        except BrokerError as exc:
            return spb.EndTransactionResponse(status=status(code_for(exc, "end"), exc.remark))
        return spb.EndTransactionResponse(status=status())

    def _end_header(self, request: Any) -> EndTransactionRequestHeader:
        """The END_TRANSACTION the request means. The transaction id names the
        half message: its UNIQ_KEY (what SendMessage answers, and what a
        RecoverOrphanedTransactionCommand carries), or the private text tidemq
        answered before (kept for transactions begun before an upgrade)."""
        transaction_id = request.transaction_id
        if not transaction_id.strip():
            # EndTransactionActivity.java:46-48
            raise ConvertError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        if request.resolution not in (
            pb.TransactionResolution.COMMIT,
            pb.TransactionResolution.ROLLBACK,
        ):
            raise ConvertError(Code.BAD_REQUEST, "the resolution must be COMMIT or ROLLBACK")
        try:
            commit_log_offset, queue_offset, key = decode_legacy_transaction_id(transaction_id)
        except ConvertError:
            key = transaction_id
            where = self.transaction.locate_half(key)
            if where is None:
                # the proxy's TransactionProcessor.java:47-49 (its code: INTERNAL_SERVER_ERROR)
                raise ConvertError(
                    Code.INVALID_TRANSACTION_ID, "cannot found transaction data"
                ) from None
            commit_log_offset, queue_offset = where
        commit = request.resolution == pb.TransactionResolution.COMMIT
        return EndTransactionRequestHeader(
            producer_group=request.topic.name,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=TRANSACTION_COMMIT if commit else TRANSACTION_ROLLBACK,
            from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id or key,
            transaction_id=key,
            topic=request.topic.name,
        )

    @_names_checked(spb.RecallMessageResponse)
    async def RecallMessage(self, request: Any, context: Any) -> Any:
        try:
            message_id = await self.send.recall_message(
                request.topic.name, request.recall_handle, request.topic.name
            )
        except BrokerError as exc:
            return spb.RecallMessageResponse(status=status(code_for(exc, "recall"), exc.remark))
        return spb.RecallMessageResponse(status=status(), message_id=message_id)

    # -- receive and acknowledge -----------------------------------------------------

    @_names_checked_stream(spb.ReceiveMessageResponse)
    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            messages = await self._receive(request, context)
        except ConvertError as exc:
            yield spb.ReceiveMessageResponse(status=status(exc.code, exc.message))
            return
        except BrokerError as exc:
            yield spb.ReceiveMessageResponse(status=status(code_for(exc, "receive"), exc.remark))
            return
        if messages:
            yield spb.ReceiveMessageResponse(status=status())
            for message in messages:
                yield spb.ReceiveMessageResponse(message=message)
        else:
            yield spb.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
        yield spb.ReceiveMessageResponse(delivery_timestamp=timestamp_of(self.clock.now_ms()))

    async def _receive(self, request: Any, context: Any) -> list[Any]:
        topic = request.message_queue.topic.name
        self._topic(topic)
        if request.auto_renew:
            invisible_ms = self.renewals.settings.default_invisible_ms
        else:
            invisible_ms = duration_ms(request.invisible_duration)
            invisible_problem(invisible_ms, self.config.min_invisible_time_mills_for_recv)
        poll_s = (
            duration_ms(request.long_polling_timeout) / 1000
            if request.HasField("long_polling_timeout")
            else DEFAULT_POLL_S
        )
        # the proxy clamps a polling time out of range (ReceiveMessageActivity.java:77-83)
        poll_s = min(max(poll_s, 0.0), MAX_POLL_S)
        remaining = context.time_remaining()
        if remaining is not None:
            poll_s = max(0.0, min(poll_s, remaining - DEADLINE_MARGIN_S))
        expression = request.filter_expression
        kind = "SQL92" if expression.type == pb.FilterType.SQL else "TAG"
        result = await self.pop.pop(
            PopRequest(
                group=request.group.name,
                topic=topic,
                max_nums=request.batch_size or 32,
                invisible_ms=invisible_ms,
                queue_id=ALL_QUEUES,
                poll_ms=int(poll_s * 1000),
                expression=expression.expression or "*",
                expression_type=kind,
                attempt_id=request.attempt_id or None,
                client_host=self._peer(context),
            )
        )
        delivered = []
        for popped in result.messages:
            try:
                record, _ = decode_record(popped.record, decompress=True)
            except ProtocolError as exc:
                log.error("a popped record is unreadable: %s", exc)
                continue
            message = delivered_message(
                record,
                popped.topic,
                receipt_handle=popped.receipt_handle,
                delivery_attempt=popped.delivery_attempt,
                invisible_ms=invisible_ms,
            )
            delivered.append(message)
            if request.auto_renew and self.renewals.settings.enabled:
                self.renewals.hold(
                    _client_id(context),
                    request.group.name,
                    topic,
                    message.system_properties.message_id,
                    popped.receipt_handle,
                    popped.delivery_attempt,
                )
        return delivered

    @_names_checked(spb.AckMessageResponse)
    async def AckMessage(self, request: Any, context: Any) -> Any:
        """Each entry answers for itself; the top status is the one code they
        share, by name, or MULTIPLE_RESULTS (AckMessageActivity.java:184-193)."""
        results = []
        client_id = _client_id(context)
        for entry in request.entries:
            try:
                handle = await self.renewals.take(
                    client_id, request.group.name, entry.message_id, entry.receipt_handle
                )
                self._check_not_expired(handle)
                await self.pop.ack(request.group.name, request.topic.name, handle)
                entry_status = status()
            except BrokerError as exc:
                entry_status = status(code_for(exc, "ack"), exc.remark)
            results.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id,
                    receipt_handle=entry.receipt_handle,
                    status=entry_status,
                )
            )
        codes = {result.status.code for result in results}
        if len(codes) == 1:
            top = status(codes.pop())
        elif codes:
            top = status(Code.MULTIPLE_RESULTS)
        else:
            top = status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        return spb.AckMessageResponse(status=top, entries=results)

    @_names_checked(spb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        invisible_ms = duration_ms(request.invisible_duration)
        try:
            invisible_problem(invisible_ms, 0)
        except ConvertError as exc:
            return spb.ChangeInvisibleDurationResponse(
                status=status(exc.code, exc.message), receipt_handle=request.receipt_handle
            )
        try:
            current = await self.renewals.take(
                _client_id(context), request.group.name, request.message_id, request.receipt_handle
            )
            self._check_not_expired(current)
            handle = await self.pop.change_invisible(
                request.group.name, request.topic.name, current, invisible_ms
            )
        except BrokerError as exc:
            return spb.ChangeInvisibleDurationResponse(
                status=status(code_for(exc, "invisible"), exc.remark),
                receipt_handle=request.receipt_handle,
            )
        return spb.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

    @_names_checked(spb.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        try:
            current = await self.renewals.take(
                _client_id(context), request.group.name, request.message_id, request.receipt_handle
            )
            await self.pop.forward_to_dlq(request.group.name, request.topic.name, current)
        except BrokerError as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(
                status=status(code_for(exc, "dlq"), exc.remark)
            )
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status())

    # -- offsets (not used by the official clients) ------------------------------------

    @_names_checked_stream(spb.PullMessageResponse)
    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        queue = request.message_queue
        expression = request.filter_expression
        try:
            self._topic(queue.topic.name)
            result = await self.pull.pull(
                PullRequest(
                    group=request.group.name,
                    topic=queue.topic.name,
                    queue_id=queue.id,
                    queue_offset=request.offset,
                    max_msg_nums=request.batch_size or 32,
                    sys_flag=sysflag.PULL_SUBSCRIPTION,
                    subscription=expression.expression or "*",
                    expression_type="SQL92" if expression.type == pb.FilterType.SQL else "TAG",
                )
            )
        except ConvertError as exc:
            yield spb.PullMessageResponse(status=status(exc.code, exc.message))
            return
        except BrokerError as exc:
            yield spb.PullMessageResponse(status=status(code_for(exc, "pull"), exc.remark))
            return
        if result.code == ResponseCode.SUCCESS:
            yield spb.PullMessageResponse(status=status())
            for record in decode_records(result.body, decompress=True):
                yield spb.PullMessageResponse(message=delivered_message(record, record.topic))
        elif result.code == ResponseCode.PULL_OFFSET_MOVED:
            yield spb.PullMessageResponse(
                status=status(Code.ILLEGAL_OFFSET, f"offset {request.offset} is out of range")
            )
        else:
            yield spb.PullMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.PullMessageResponse(next_offset=result.next_begin_offset)

    @_names_checked(spb.UpdateOffsetResponse)
    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        try:
            self._topic(queue.topic.name)
        except ConvertError as exc:
            return spb.UpdateOffsetResponse(status=status(exc.code, exc.message))
        if request.offset < 0:
            return spb.UpdateOffsetResponse(status=status(Code.ILLEGAL_OFFSET, "negative offset"))
        self.pull.update_consumer_offset(
            request.group.name, queue.topic.name, queue.id, request.offset
        )
        return spb.UpdateOffsetResponse(status=status())

    @_names_checked(spb.GetOffsetResponse)
    async def GetOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        offset = self.pull.committed_offset(request.group.name, queue.topic.name, queue.id)
        if offset < 0:
            return spb.GetOffsetResponse(
                status=status(Code.OFFSET_NOT_FOUND, "the group has no offset for this queue")
            )
        return spb.GetOffsetResponse(status=status(), offset=offset)

    @_names_checked(spb.QueryOffsetResponse)
    async def QueryOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        try:
            self._topic(queue.topic.name)
        except ConvertError as exc:
            return spb.QueryOffsetResponse(status=status(exc.code, exc.message))
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.Value("BEGINNING"):
            offset = self.pull.min_offset(queue.topic.name, queue.id)
        elif policy == pb.QueryOffsetPolicy.Value("END"):
            offset = self.pull.max_offset(queue.topic.name, queue.id)
        else:
            offset = self.pull.search_offset(
                queue.topic.name, queue.id, millis_of(request.timestamp)
            )
        return spb.QueryOffsetResponse(status=status(), offset=offset)
