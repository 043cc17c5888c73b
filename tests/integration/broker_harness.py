"""A name server + broker on port 0 and a RemotingClient, for the broker's integration tests."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from tidemq.broker.config import BrokerConfig
from tidemq.common import properties as props
from tidemq.common import sysflag
from tidemq.namesrv.app import NameServer
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeaderV2,
    encode_header,
)
from tidemq.server.broker import Broker
from tidemq.transport import Connection, Handler, RemotingClient

FAST_DELAY_LEVELS = "1s 1s 1s 1s 1s 2s"
"""Level 3 (the first retry) is 1 s, so retries land quickly."""


@dataclasses.dataclass
class Cluster:
    namesrv: NameServer
    broker: Broker
    client: RemotingClient
    data_dir: Path

    @property
    def address(self) -> str:
        return self.broker.address

    async def call(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout: float = 3.0,
        client: RemotingClient | None = None,
    ) -> RemotingCommand:
        command = RemotingCommand.request(code, ext_fields, body)
        return await (client or self.client).invoke(self.address, command, timeout)

    async def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        queue_id: int = 0,
        tags: str | None = None,
        keys: str | None = None,
        properties: Mapping[str, str] | None = None,
        client: RemotingClient | None = None,
        **header: Any,
    ) -> RemotingCommand:
        table: dict[str, str] = {}
        if tags is not None:
            table[props.TAGS] = tags
        if keys is not None:
            table[props.KEYS] = keys
        table.update(properties or {})
        fields = {
            "producer_group": "PG",
            "topic": topic,
            "default_topic": "TBW102",
            "default_topic_queue_nums": 4,
            "queue_id": queue_id,
            "sys_flag": 0,
            "born_timestamp": int(time.time() * 1000),
            "flag": 0,
            "properties": props.encode_properties(table),
            **header,
        }
        ext = encode_header(SendMessageRequestHeaderV2(**fields))
        payload = body.encode() if isinstance(body, str) else body
        return await self.call(RequestCode.SEND_MESSAGE_V2, ext, payload, client=client)

    async def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "CG",
        subscription: str | None = "*",
        suspend_ms: int = 0,
        max_nums: int = 32,
        commit_offset: int = 0,
        client: RemotingClient | None = None,
    ) -> RemotingCommand:
        flag = sysflag.build_pull_sys_flag(
            commit_offset=commit_offset > 0,
            suspend=suspend_ms > 0,
            subscription=subscription is not None,
        )
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_ms,
            subscription=subscription,
            sub_version=0,
        )
        return await self.call(
            RequestCode.PULL_MESSAGE,
            encode_header(header),
            timeout=suspend_ms / 1000 + 5.0,
            client=client,
        )

    async def route(self, topic: str) -> dict[str, Any] | None:
        command = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await self.client.invoke(self.namesrv.address, command)
        if response.code != 0:
            return None
        document: dict[str, Any] = json.loads(response.body)
        return document

    async def heartbeat(
        self,
        client_id: str,
        group: str,
        *,
        topics: Mapping[str, str] | None = None,
        producer_group: str | None = None,
        client: RemotingClient | None = None,
    ) -> RemotingCommand:
        subscriptions = [
            {"topic": topic, "subString": expression, "tagsSet": [], "codeSet": [], "subVersion": 1}
            for topic, expression in (topics or {}).items()
        ]
        body: dict[str, Any] = {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": subscriptions,
                    "unitMode": False,
                }
            ],
            "producerDataSet": [{"groupName": producer_group}] if producer_group else [],
        }
        return await self.call(RequestCode.HEART_BEAT, {}, json.dumps(body).encode(), client=client)

    async def restart_broker(self, **overrides: Any) -> None:
        """Stop the broker and start a new one on the same data directory."""
        config = self.broker.config
        await self.broker.stop()
        self.broker = Broker(dataclasses.replace(config, **overrides))
        await self.broker.start()


def broker_config(data_dir: Path, namesrv: str, **overrides: Any) -> BrokerConfig:
    base = BrokerConfig(
        data_dir=data_dir,
        listen_port=0,
        namesrv_addrs=(namesrv,),
        commitlog_file_size=8 * 1024 * 1024,
        delay_levels=FAST_DELAY_LEVELS,
    )
    return dataclasses.replace(base, **overrides)


@contextlib.asynccontextmanager
async def running_cluster(
    tmp_path: Path, *, request_handler: Handler | None = None, **overrides: Any
) -> AsyncIterator[Cluster]:
    namesrv = NameServer("127.0.0.1", 0)
    await namesrv.start()
    broker = Broker(broker_config(tmp_path / "broker", namesrv.address, **overrides))
    client = RemotingClient(request_handler=request_handler)
    cluster = Cluster(namesrv, broker, client, tmp_path / "broker")
    try:
        await broker.start()
        yield cluster
    finally:
        await client.close()
        await cluster.broker.stop()
        await namesrv.stop()


class Pushes:
    """A client request handler recording server pushes (oneway, never answered)."""

    def __init__(self) -> None:
        self.received: list[RemotingCommand] = []

    async def __call__(self, request: RemotingCommand, connection: Connection) -> None:
        self.received.append(request)
