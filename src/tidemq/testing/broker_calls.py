"""Remoting calls straight to one broker address, for tests and checkers that must
say which broker they talk to (a master, or its slave) instead of letting a
client route: create a topic, send to a queue, pull a whole topic, read the
runtime figures. Used by the replication tests and the chaos checker."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import NamedTuple

from tidemq.common import sysflag
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeaderV2,
    encode_header,
)
from tidemq.record.codec import decode_records
from tidemq.transport import RemotingClient

__all__ = ["Pulled", "call", "create_topic", "pull", "pull_all", "runtime_info", "send"]

CALL_TIMEOUT_S = 10.0
PULL_BATCH = 32


async def call(
    client: RemotingClient,
    address: str,
    code: int,
    ext: Mapping[str, str] | None = None,
    body: bytes = b"",
    timeout: float = CALL_TIMEOUT_S,
) -> RemotingCommand:
    command = RemotingCommand.request(code, dict(ext or {}), body)
    return await client.invoke(address, command, timeout)


async def create_topic(client: RemotingClient, address: str, topic: str, queues: int) -> None:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    code = RequestCode.UPDATE_AND_CREATE_TOPIC
    response = await call(client, address, code, encode_header(header))
    assert response.code == ResponseCode.SUCCESS, response.remark


async def send(
    client: RemotingClient,
    address: str,
    body: bytes,
    *,
    topic: str,
    queue_id: int,
    queues: int,
    timeout: float = CALL_TIMEOUT_S,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 of `body` to `topic`/`queue_id` on the broker at `address`."""
    header = SendMessageRequestHeaderV2(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=queues,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties="",
    )
    return await call(
        client, address, RequestCode.SEND_MESSAGE_V2, encode_header(header), body, timeout
    )


class Pulled(NamedTuple):
    code: int
    remark: str
    bodies: list[bytes]
    next_offset: int
    """Where to pull from next: the broker's nextBeginOffset (the same offset without one)."""


async def pull(
    client: RemotingClient,
    address: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int = PULL_BATCH,
) -> Pulled:
    """One PULL_MESSAGE without suspending."""
    header = PullMessageRequestHeader(
        consumer_group="CG",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=sysflag.build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True),
        commit_offset=0,
        suspend_timeout_millis=0,
        subscription="*",
        sub_version=0,
    )
    response = await call(client, address, RequestCode.PULL_MESSAGE, encode_header(header))
    bodies = (
        [m.body for m in decode_records(response.body)]
        if response.code == ResponseCode.SUCCESS
        else []
    )
    next_offset = int(response.ext_fields.get("nextBeginOffset", offset))
    return Pulled(response.code, response.remark or "", bodies, next_offset)


async def pull_all(
    client: RemotingClient, address: str, topic: str, queues: int
) -> dict[int, list[bytes]]:
    """Every body of every queue of `topic`, read from `address` by PULL_MESSAGE."""
    found: dict[int, list[bytes]] = {}
    for queue_id in range(queues):
        found[queue_id] = []
        offset = 0
        while True:
            pulled = await pull(client, address, topic, queue_id, offset)
            if pulled.code != ResponseCode.SUCCESS:
                assert pulled.code in (
                    ResponseCode.PULL_NOT_FOUND,
                    ResponseCode.PULL_OFFSET_MOVED,
                ), f"{pulled.code} {pulled.remark}"
                break
            found[queue_id] += pulled.bodies
            offset = pulled.next_offset
    return found


async def runtime_info(client: RemotingClient, address: str) -> dict[str, str]:
    """The broker's GET_BROKER_RUNTIME_INFO table."""
    response = await call(client, address, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert response.code == ResponseCode.SUCCESS, response.remark
    table: dict[str, str] = json.loads(response.body)["table"]
    return table
