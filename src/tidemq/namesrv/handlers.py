"""Name server request handlers: remoting commands in, RouteTable calls, JSON bodies out.

=====  ==================================  ==============================================
code   request                             answer
=====  ==================================  ==============================================
101    GET_KV_CONFIG                       QUERY_NOT_FOUND (no KV config is kept)
103    REGISTER_BROKER                     SUCCESS (+ haServerAddr/masterAddr for a slave)
104    UNREGISTER_BROKER                   SUCCESS
105    GET_ROUTEINFO_BY_TOPIC              SUCCESS + TopicRouteData, or TOPIC_NOT_EXIST
106    GET_BROKER_CLUSTER_INFO             SUCCESS + ClusterInfo
206    GET_ALL_TOPIC_LIST_FROM_NAMESERVER  SUCCESS + ``{"topicList": [...]}``
205    WIPE_WRITE_PERM_OF_BROKER           SUCCESS + wipeTopicCount (routes.py: the mark)
216    DELETE_TOPIC_IN_NAMESRV             SUCCESS
327    ADD_WRITE_PERM_OF_BROKER            SUCCESS + addTopicCount
=====  ==================================  ==============================================

REGISTER_BROKER's body is Java's RegisterBrokerBody::

    {"topicConfigSerializeWrapper": {"topicConfigTable": {"<topic>": {TopicConfig}, ...},
                                     "dataVersion": {"timestamp": ms, "counter": n}},
     "filterServerList": []}

A bare TopicConfigSerializeWrapper (what Java brokers older than 3.0.11 send)
and an empty body (no topics) are accepted too. ``compressed=true`` bodies
are refused with SYSTEM_ERROR; a non-zero ``bodyCrc32`` must match CRC32 of
the body & 0x7FFFFFFF (Java's remark "crc32 not match" otherwise). Bodies are
written as standard JSON (ali-ons and Java clients both accept it). Header
and body errors raise ValueError, which the transport turns into SYSTEM_ERROR
with the message as remark.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerWritePermRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
    decode_header,
    encode_header,
)
from tidemq.protocol.name_fields import refuse_bad_names
from tidemq.transport import Connection, Handler

from .routes import RouteTable

__all__ = ["NamesrvHandlers", "RegisterBrokerBody", "encode_json", "parse_register_body"]

logger = logging.getLogger("tidemq.namesrv")


def encode_json(document: object) -> bytes:
    """A response body: compact standard JSON."""
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    topic_config_table: Mapping[str, object] = field(default_factory=dict)
    data_version: object = None
    filter_server_list: tuple[str, ...] = ()


def parse_register_body(body: bytes) -> RegisterBrokerBody:
    """Decode REGISTER_BROKER's JSON body; ValueError if it is not one."""
    if not body.strip():
        return RegisterBrokerBody()
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"REGISTER_BROKER body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("REGISTER_BROKER body must be a JSON object")
    wrapper = document.get("topicConfigSerializeWrapper", document)
    if not isinstance(wrapper, dict):
        raise ValueError("REGISTER_BROKER topicConfigSerializeWrapper must be an object")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise ValueError("REGISTER_BROKER topicConfigTable must be an object")
    filter_servers = document.get("filterServerList") or []
    if not isinstance(filter_servers, list) or not all(isinstance(s, str) for s in filter_servers):
        raise ValueError("REGISTER_BROKER filterServerList must be a list of strings")
    return RegisterBrokerBody(table, wrapper.get("dataVersion"), tuple(filter_servers))


def _body_crc32(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


class NamesrvHandlers:
    """The name server's request-code -> handler table over one RouteTable."""

    def __init__(self, routes: RouteTable) -> None:
        self.routes = routes

    def table(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
        }
        return {code: _name_checked(handler) for code, handler in handlers.items()}

    async def register_broker(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        header = decode_header(RegisterBrokerRequestHeader, request.ext_fields)
        if header.compressed:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                "compressed REGISTER_BROKER bodies are not supported; "
                "register with compressed=false",
            )
        if header.body_crc32 != 0 and _body_crc32(request.body) != header.body_crc32:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, "crc32 not match"
            )
        body = parse_register_body(request.body)
        known = self.routes.broker(header.broker_addr) is not None
        result = self.routes.register(
            cluster=header.cluster_name,
            broker_name=header.broker_name,
            broker_addr=header.broker_addr,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_configs=body.topic_config_table,
            data_version=body.data_version,
            channel=connection,
        )
        if not known:
            logger.info(
                "broker registered: %s %s id %d at %s (%d topics)",
                header.cluster_name,
                header.broker_name,
                header.broker_id,
                header.broker_addr,
                len(body.topic_config_table),
            )
        ext_fields = encode_header(
            RegisterBrokerResponseHeader(
                ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
            )
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=ext_fields)

    async def unregister_broker(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        header = decode_header(UnregisterBrokerRequestHeader, request.ext_fields)
        if self.routes.unregister(header.broker_addr) is not None:
            logger.info(
                "broker unregistered: %s %s id %d at %s",
                header.cluster_name,
                header.broker_name,
                header.broker_id,
                header.broker_addr,
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def get_route_info(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetRouteInfoRequestHeader, request.ext_fields)
        route = self.routes.route(header.topic)
        if route is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=encode_json(route))

    async def get_cluster_info(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        body = encode_json(self.routes.cluster_info())
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def get_all_topics(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        body = encode_json({"topicList": self.routes.all_topics()})
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def delete_topic(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        header = decode_header(DeleteTopicFromNamesrvRequestHeader, request.ext_fields)
        if self.routes.delete_topic(header.topic, header.cluster_name):
            logger.info("topic deleted: %s", header.topic)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def wipe_write_perm(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return self._write_perm(request, connection, writable=False)

    async def add_write_perm(
        self, request: RemotingCommand, connection: Connection
    ) -> RemotingCommand:
        return self._write_perm(request, connection, writable=True)

    def _write_perm(
        self, request: RemotingCommand, connection: Connection, *, writable: bool
    ) -> RemotingCommand:
        header = decode_header(BrokerWritePermRequestHeader, request.ext_fields)
        name = header.broker_name
        count = self.routes.add_write_perm(name) if writable else self.routes.wipe_write_perm(name)
        logger.info(
            "write permission of broker %s %s (%d topics), asked by %s",
            name,
            "given back" if writable else "wiped",
            count,
            connection.remote[0],
        )
        answer: object = (
            AddWritePermOfBrokerResponseHeader(add_topic_count=count)
            if writable
            else WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)
        )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields=encode_header(answer)
        )

    async def get_kv_config(
        self, request: RemotingCommand, _connection: Connection
    ) -> RemotingCommand:
        header = decode_header(GetKVConfigRequestHeader, request.ext_fields)
        return RemotingCommand.response_to(
            request,
            ResponseCode.QUERY_NOT_FOUND,
            f"No config item, Namespace: {header.namespace} Key: {header.key}",
        )


def _name_checked(handler: Handler) -> Handler:
    """`handler` behind the topic/group name check every request passes."""

    async def handle(request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        refusal = refuse_bad_names(request)
        if refusal is not None:
            return refusal
        return await handler(request, connection)

    return handle
