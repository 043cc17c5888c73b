"""Half messages as records: reading them back, and what is built from them.

The transaction parts store and read plain records; this module turns a
stored half into its re-appended copy (check-back), its committed message
(END_TRANSACTION commit), the op record that resolves it, and the
CHECK_TRANSACTION_STATE request a producer is asked with.

Java references (rocketmq-all 4.9.7): TransactionalMessageBridge
(parseHalfMessageInner, renewHalfMessageInner, addRemoveTagInTransactionOp),
EndTransactionProcessor.endMessageTransaction, AbstractTransactionalMessage
CheckListener.sendCheckMessage, Broker2Client.checkProducerTransactionState.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.broker.retry import split_address
from tidemq.broker.schedule import stored_again
from tidemq.broker.transaction_policy import HALF_TOPIC, OP_TAG, OP_TOPIC, op_body
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.common.message import MessageExt
from tidemq.common.properties import edit_properties, encode_properties_bytes
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.errors import ProtocolError
from tidemq.protocol.headers import CheckTransactionStateRequestHeader, encode_header
from tidemq.record.codec import decode_record, encode_record, peek_properties
from tidemq.store.api import MessageToStore

__all__ = [
    "StoredHalf",
    "check_command",
    "committed_message",
    "decode_half",
    "half_copy",
    "op_record",
]


@dataclass(frozen=True, slots=True)
class StoredHalf:
    """A half message as stored: the decoded record and its raw property string."""

    record: MessageExt
    raw_properties: str

    @property
    def key(self) -> str:
        """The transaction's key: the producer's message id (UNIQ_KEY), which
        every re-appended copy keeps; the offset id only if it has none."""
        return self.record.properties.get(props.UNIQ_KEY) or self.record.msg_id

    @property
    def producer_group(self) -> str | None:
        return self.record.properties.get(props.PGROUP)

    def real_queue(self) -> tuple[str, int]:
        """REAL_TOPIC and REAL_QID; ValueError when they are missing or malformed."""
        record = self.record
        topic = record.properties.get(props.REAL_TOPIC)
        raw_qid = record.properties.get(props.REAL_QID, "")
        if not topic:
            raise ValueError(f"half message {record.msg_id} has no REAL_TOPIC")
        if not raw_qid.isdigit():
            raise ValueError(f"half message {record.msg_id} has REAL_QID {raw_qid!r}")
        return topic, int(raw_qid)


def decode_half(buf: bytes | memoryview) -> StoredHalf | None:
    """The half message in `buf`, or None when it is not a readable record of
    the half topic (an END_TRANSACTION may name any commit-log offset)."""
    try:
        record, _ = decode_record(buf)
        raw = peek_properties(buf)
    except ProtocolError:
        return None
    if record.topic != HALF_TOPIC:
        return None
    return StoredHalf(record, raw)


def half_copy(half: StoredHalf, times_checked: int) -> MessageToStore:
    """The half re-appended at the end of the half queue, TRANSACTION_CHECK_TIMES
    set to `times_checked` (the count lives in the commitlog, so it survives)."""
    properties = edit_properties(
        half.raw_properties, {props.TRANSACTION_CHECK_TIMES: str(times_checked)}
    )
    return stored_again(half.record, HALF_TOPIC, 0, properties)


def committed_message(half: StoredHalf) -> MessageToStore:
    """The message a commit stores: real topic and queue, commit sysflag, the
    half's body, born time and host and its properties as stored (Java's
    endMessageTransaction clears REAL_*, TRAN_MSG from the map but writes the
    property string made before, so the records keep them; so do ours).
    ValueError when the half lacks REAL_TOPIC / REAL_QID."""
    record = half.record
    topic, queue_id = half.real_queue()
    commit = sysflag.reset_transaction_value(record.sys_flag, sysflag.TRANSACTION_COMMIT_TYPE)
    return stored_again(record, topic, queue_id, half.raw_properties, sys_flag=commit)


def op_record(half: StoredHalf, store_host: bytes, store_port: int) -> MessageToStore:
    """The op record resolving `half`: tag "d", body its queue offset (Java's
    format). KEYS carries the transaction's key, so a restart can rebuild which
    transactions are resolved without reading the halves again."""
    properties = props.encode_properties({props.TAGS: OP_TAG, props.KEYS: half.key})
    return MessageToStore(
        topic=OP_TOPIC,
        queue_id=0,
        body=op_body(half.record.queue_offset),
        properties=properties,
        born_timestamp=half.record.store_timestamp,
        born_host=store_host,
        born_port=store_port,
    )


def check_command(copy: StoredHalf) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE (oneway) for the re-appended copy: the header
    names the copy (its queue and commit-log offsets, which the producer's
    END_TRANSACTION must quote back); the body is the copy encoded as a record
    with its real topic and queue, as Java's MessageDecoder.encode does."""
    record = copy.record
    topic, queue_id = copy.real_queue()
    key = record.properties.get(props.UNIQ_KEY)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=record.queue_offset,
        commit_log_offset=record.commit_log_offset,
        msg_id=key,
        transaction_id=key,
        offset_msg_id=record.msg_id,
        topic=topic,
    )
    born_host, born_port = split_address(record.born_host)
    store_host, store_port = split_address(record.store_host)
    body = encode_record(
        topic.encode(),
        queue_id,
        record.flag,
        record.queue_offset,
        record.commit_log_offset,
        record.sys_flag,
        record.born_timestamp,
        born_host,
        born_port,
        record.store_timestamp,
        store_host,
        store_port,
        record.reconsume_times,
        record.prepared_transaction_offset,
        record.body,
        encode_properties_bytes(record.properties),
    )
    return RemotingCommand.request(
        RequestCode.CHECK_TRANSACTION_STATE, encode_header(header), body, oneway=True
    )
