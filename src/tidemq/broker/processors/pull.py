"""PullProcessor: PULL_MESSAGE, consumer offsets, queue offsets, message queries.

Codes: PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET,
GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, QUERY_MESSAGE, VIEW_MESSAGE_BY_ID. The gRPC
endpoint's PullMessage, UpdateOffset, GetOffset and QueryOffset call the same
methods.

Java references (rocketmq-all 4.9.7): PullMessageProcessor (pull checks,
status mapping, commit offset, suspend), ConsumerManageProcessor (offsets),
QueryMessageProcessor. Deliberate differences are noted where they are made.
"""

from __future__ import annotations

from tidemq.broker.config import BrokerConfig
from tidemq.broker.consume_checks import ConsumeChecks
from tidemq.broker.consumers import ConsumerManager
from tidemq.broker.groups import SubscriptionGroupConfig
from tidemq.broker.long_polling import LongPollingService, hold_time_s
from tidemq.broker.offsets import ConsumerOffsetManager
from tidemq.broker.remoting import RequestHandler, ok
from tidemq.broker.requests import BrokerError, PullRequest, PullResult, pull_code
from tidemq.broker.slave_read import (
    in_memory_limit,
    slave_pull_answer,
    suggest_pulling_from_slave,
    suggest_which_broker_id,
    total_physical_memory,
)
from tidemq.broker.stats import BrokerStats
from tidemq.common import sysflag
from tidemq.ha.config import BrokerRole
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    QUERY_BELOW_OFFSET,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    decode_header,
    encode_header,
)
from tidemq.protocol.heartbeat import BROADCASTING, CONSUME_FROM_TIMESTAMP, EXPRESSION_TAG
from tidemq.store.api import GetResult, MessageFilter, MessageStore, QueryResult
from tidemq.transport import Connection

__all__ = ["MAX_MSGS_NUM_BATCH", "MAX_PULL_BATCH", "PullProcessor"]

MAX_MSGS_NUM_BATCH = 64
"""Records a key QUERY_MESSAGE answers at most (Java's maxMsgsNumBatch, IndexService)."""
MAX_PULL_BATCH = 1024
UNIQUE_KEY_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


class PullProcessor:
    """Reading for consumers: pulls, offsets, queries (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        consumers: ConsumerManager,
        stats: BrokerStats,
        long_polling: LongPollingService,
        checks: ConsumeChecks,
    ) -> None:
        self.config = config
        self.store = store
        self.offsets = offsets
        self.consumers = consumers
        self.stats = stats
        self.long_polling = long_polling
        self.checks = checks
        self._slave = config.broker_role is BrokerRole.SLAVE
        fixed_limit = config.access_message_in_memory_max_bytes
        self._in_memory_limit = (
            fixed_limit
            if fixed_limit is not None
            else in_memory_limit(total_physical_memory(), config.access_message_in_memory_max_ratio)
        )

    def handlers(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.PULL_MESSAGE: self.handle_pull_message,
            RequestCode.QUERY_CONSUMER_OFFSET: self.handle_query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.handle_update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: self.handle_get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.handle_get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.handle_search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.handle_get_earliest_msg_storetime,
            RequestCode.QUERY_MESSAGE: self.handle_query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.handle_view_message_by_id,
        }

    # -- remoting ------------------------------------------------------------------------

    async def handle_pull_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand | None:
        header = decode_header(PullMessageRequestHeader, request.ext_fields)
        host, port = connection.remote[0], connection.remote[1]
        result = await self.pull(
            PullRequest(
                group=header.consumer_group,
                topic=header.topic,
                queue_id=header.queue_id,
                queue_offset=header.queue_offset,
                max_msg_nums=header.max_msg_nums,
                sys_flag=header.sys_flag,
                commit_offset=header.commit_offset,
                suspend_timeout_ms=header.suspend_timeout_millis,
                subscription=header.subscription,
                sub_version=header.sub_version,
                expression_type=header.expression_type,
                max_msg_bytes=header.max_msg_bytes,
                client_address=f"{host}:{port}",
            )
        )
        ext = encode_header(
            PullMessageResponseHeader(
                suggest_which_broker_id=result.suggest_which_broker_id,
                next_begin_offset=result.next_begin_offset,
                min_offset=result.min_offset,
                max_offset=result.max_offset,
            )
        )
        response = RemotingCommand.response_to(
            request, result.code, result.remark, ext, result.body
        )
        if result.held:
            # Its consumer has been waiting: written at once, not after the
            # writes queued in this pass (such as the answer to the send that
            # woke it), which would put a socket write on the message's way.
            connection.answer_now(request, response)
            return None
        return response

    async def handle_query_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(QueryConsumerOffsetRequestHeader, request.ext_fields)
        offset = self.query_consumer_offset(
            header.consumer_group, header.topic, header.queue_id, header.set_zero_if_not_found
        )
        return ok(request, encode_header(QueryConsumerOffsetResponseHeader(offset=offset)))

    async def handle_update_consumer_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(UpdateConsumerOffsetRequestHeader, request.ext_fields)
        self.update_consumer_offset(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return ok(request)

    async def handle_get_max_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetMaxOffsetRequestHeader, request.ext_fields)
        offset = self.max_offset(header.topic, header.queue_id)
        return ok(request, encode_header(GetMaxOffsetResponseHeader(offset=offset)))

    async def handle_get_min_offset(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetMinOffsetRequestHeader, request.ext_fields)
        offset = self.min_offset(header.topic, header.queue_id)
        return ok(request, encode_header(GetMinOffsetResponseHeader(offset=offset)))

    async def handle_search_offset_by_timestamp(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(SearchOffsetRequestHeader, request.ext_fields)
        offset = self.search_offset(header.topic, header.queue_id, header.timestamp)
        return ok(request, encode_header(SearchOffsetResponseHeader(offset=offset)))

    async def handle_get_earliest_msg_storetime(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetEarliestMsgStoretimeRequestHeader, request.ext_fields)
        timestamp = self.earliest_store_time(header.topic, header.queue_id)
        return ok(
            request, encode_header(GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp))
        )

    async def handle_query_message(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(QueryMessageRequestHeader, request.ext_fields)
        unique = request.ext_fields.get(UNIQUE_KEY_QUERY_FLAG, "").lower() == "true"
        below = request.ext_fields.get(QUERY_BELOW_OFFSET)
        try:
            below_offset = int(below) if below is not None and not unique else None
        except ValueError:
            raise BrokerError(
                ResponseCode.INVALID_PARAMETER, f"{QUERY_BELOW_OFFSET} is not a number: {below}"
            ) from None
        result = self.query_message(
            header.topic,
            header.key,
            header.max_num,
            header.begin_timestamp,
            header.end_timestamp,
            unique_key=unique,
            below_offset=below_offset,
        )
        ext = encode_header(
            QueryMessageResponseHeader(
                index_last_update_timestamp=result.index_last_update_timestamp,
                index_last_update_phyoffset=result.index_last_update_phy_offset,
            )
        )
        if below_offset is not None:
            ext[QUERY_BELOW_OFFSET] = str(below_offset)
        return ok(request, ext, b"".join(result.buffers))

    async def handle_view_message_by_id(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(ViewMessageRequestHeader, request.ext_fields)
        return ok(request, body=self.view_message(header.offset))

    # -- pull ----------------------------------------------------------------------------

    def _pull_filter(
        self, request: PullRequest
    ) -> tuple[MessageFilter | None, SubscriptionGroupConfig]:
        """PullMessageProcessor's checks; the filter to read with (None: all)
        and the group's config."""
        group_config, config = self.checks.readable(request.group, request.topic)
        if not 0 <= request.queue_id < config.read_queue_nums:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}] "
                f"consumer:[{request.client_address}]",
            )
        if sysflag.pull_has_subscription(request.sys_flag):
            expression = request.subscription
            expression_type = request.expression_type or EXPRESSION_TAG
        else:
            expression, expression_type = self._registered_subscription(request, group_config)
        return self.checks.message_filter(expression, expression_type), group_config

    def _registered_subscription(
        self, request: PullRequest, group_config: SubscriptionGroupConfig
    ) -> tuple[str, str]:
        info = self.consumers.get(request.group)
        if info is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist, group {request.group}",
            )
        if not group_config.consume_broadcast_enable and info.message_model == BROADCASTING:
            raise BrokerError(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{request.group}] can not consume by broadcast way",
            )
        subscription = info.subscriptions.get(request.topic)
        if subscription is None:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, topic {request.topic}",
            )
        if subscription.sub_version < request.sub_version:
            raise BrokerError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return subscription.sub_string, subscription.expression_type

    def _read(
        self,
        request: PullRequest,
        message_filter: MessageFilter | None,
        group_config: SubscriptionGroupConfig,
    ) -> PullResult:
        max_nums = max(1, min(request.max_msg_nums, MAX_PULL_BATCH))
        get: GetResult = self.store.get_messages(
            request.group,
            request.topic,
            request.queue_id,
            request.queue_offset,
            max_nums,
            message_filter,
            request.max_msg_bytes,
        )
        code = pull_code(get.status, request.queue_offset)
        result = PullResult(code, get.next_begin_offset, get.min_offset, get.max_offset)
        self._suggest(request, get, group_config, result)
        if code == ResponseCode.SUCCESS:
            result.body = get.body()
            result.message_count = get.message_count
            self.stats.record_get(
                request.topic,
                request.group,
                get.message_count,
                len(result.body),
                request.queue_id,
                get.next_begin_offset,
            )
        return result

    def _suggest(
        self,
        request: PullRequest,
        get: GetResult,
        group_config: SubscriptionGroupConfig,
        result: PullResult,
    ) -> None:
        """suggestWhichBrokerId, and a slave's own answer (tidemq.broker.slave_read)."""
        slowly = bool(get.physical_offsets) and suggest_pulling_from_slave(
            self.store.commitlog_max_offset(), get.physical_offsets[-1], self._in_memory_limit
        )
        result.suggest_which_broker_id = suggest_which_broker_id(
            slave_read_enable=self.config.slave_read_enable,
            pulling_from_slave=slowly,
            group_broker_id=group_config.broker_id,
            which_broker_when_consume_slowly=group_config.which_broker_when_consume_slowly,
        )
        if self._slave:
            answer = slave_pull_answer(
                status=get.status,
                code=result.code,
                request_offset=request.queue_offset,
                next_begin_offset=result.next_begin_offset,
                suggestion=result.suggest_which_broker_id,
                group_broker_id=group_config.broker_id,
                offset_check_in_slave=self.config.offset_check_in_slave,
            )
            result.code = answer.code
            result.next_begin_offset = answer.next_begin_offset
            result.suggest_which_broker_id = answer.suggest_which_broker_id

    async def pull(self, request: PullRequest) -> PullResult:
        """PULL_MESSAGE: read, commit the carried offset, hold when nothing is new."""
        message_filter, group_config = self._pull_filter(request)
        result = self._read(request, message_filter, group_config)
        if sysflag.pull_has_commit_offset(request.sys_flag) and not self._slave:
            # A slave keeps its master's offsets (PullMessageProcessor stores the
            # pull's commit offset only when the broker is not a SLAVE).
            self.offsets.commit(
                request.group, request.topic, request.queue_id, request.commit_offset
            )
        if result.code != ResponseCode.PULL_NOT_FOUND:
            return result
        hold_s = hold_time_s(
            suspend_flag=sysflag.pull_has_suspend(request.sys_flag),
            client_suspend_ms=request.suspend_timeout_ms,
            long_polling_enable=self.config.long_polling_enable,
            short_polling_time_ms=self.config.short_polling_time_ms,
        )
        if hold_s is None:
            return result
        matches = message_filter.matches_tags_code if message_filter is not None else None
        held = self.long_polling.hold(
            request.topic, request.queue_id, request.queue_offset, hold_s, matches
        )
        if held is None:
            return result
        await self.long_polling.wait(held)
        result = self._read(request, *self._pull_filter(request))
        result.held = True
        return result

    # -- consumer offsets ----------------------------------------------------------------

    def query_consumer_offset(
        self, group: str, topic: str, queue_id: int, set_zero_if_not_found: bool | None = None
    ) -> int:
        """The committed offset. For none: 0 while the queue still starts at
        offset 0 (Java's rule, so a new group reads from the beginning), else
        QUERY_NOT_FOUND.

        Two refinements over Java 4.9.7: `set_zero_if_not_found=False` (5.x)
        asks for QUERY_NOT_FOUND, and so does a group whose consumers declared
        CONSUME_FROM_TIMESTAMP in their heartbeat: the client then searches the
        offset by its timestamp instead of starting at 0, which is what it
        asked for (with Java a new group would read everything)."""
        offset = self.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        info = self.consumers.get(group)
        from_timestamp = info is not None and info.consume_from_where == CONSUME_FROM_TIMESTAMP
        if (
            set_zero_if_not_found is not False
            and not from_timestamp
            and self.store.min_offset(topic, queue_id) <= 0
        ):
            return 0
        raise BrokerError(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The offset the group committed on the queue, -1 for none (no rule applied)."""
        return self.offsets.query(group, topic, queue_id)

    def update_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        return self.offsets.commit(group, topic, queue_id, offset)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.min_offset(topic, queue_id)

    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First offset stored at/after the time, else the max offset (doc §2.3)."""
        return self.store.offset_by_time(topic, queue_id, timestamp_ms)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        return self.store.store_time(topic, queue_id, self.store.min_offset(topic, queue_id))

    # -- queries -------------------------------------------------------------------------

    def query_message(
        self,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique_key: bool = False,
        below_offset: int | None = None,
    ) -> QueryResult:
        """QUERY_MESSAGE: records whose KEYS (or UNIQ_KEY) hold `key`, newest
        first; `below_offset` (tidemq's paging cursor) keeps only records
        before that commit-log offset."""
        if unique_key:
            result = self.store.query_by_unique_key(topic, key)
        else:
            limit = max(1, min(max_num, MAX_MSGS_NUM_BATCH))
            result = self.store.query_by_key(
                topic, key, limit, begin_ms, end_ms, below_offset=below_offset
            )
        if not result.buffers:
            raise BrokerError(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct"
            )
        return result

    def view_message(self, physical_offset: int) -> bytes:
        """VIEW_MESSAGE_BY_ID: the record at a commit-log offset."""
        record = None
        if physical_offset >= 0:
            record = self.store.read_by_physical_offset(physical_offset)
        if record is None:
            raise BrokerError(
                ResponseCode.SYSTEM_ERROR,
                f"can not find message by the offset, {physical_offset}",
            )
        return bytes(record)
