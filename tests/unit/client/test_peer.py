"""Naming what answered when an address given as the name server is not one."""

from __future__ import annotations

import json

from tidemq.client._peer import describe_broker, not_a_name_server, parse_java_properties
from tidemq.client._wire import foreign_peer
from tidemq.client.errors import ClientError
from tidemq.protocol import RemotingCommand, RequestCode, ResponseCode

REFUSAL = RemotingCommand.response_to(
    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC),
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
    " request type 105 not supported",
)


def answer(code: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.response_to(
        RemotingCommand.request(code), ResponseCode.SUCCESS, None, None, body
    )


def test_java_properties_text() -> None:
    text = "#comment\nbrokerName=broker-a\n\nnamesrvAddr=h1:9876;h2:9876\nodd line\nx = y \n"
    assert parse_java_properties(text) == {
        "brokerName": "broker-a",
        "namesrvAddr": "h1:9876;h2:9876",
        "x": "y",
    }


def test_a_broker_is_named_with_its_name_servers() -> None:
    runtime = {"brokerVersionDesc": "tidemq 0.1.0"}
    config = {"brokerName": "broker-a", "brokerClusterName": "C", "namesrvAddr": "10.0.0.1:9876"}
    assert describe_broker("h:10911", runtime, config) == (
        "h:10911 is a tidemq broker (broker-a of cluster C), not a name server; "
        "its name server is 10.0.0.1:9876"
    )
    config["namesrvAddr"] = "a:1;b:2"
    assert describe_broker("h:10911", {"brokerVersionDesc": "V5_3_1"}, config).endswith(
        "is a RocketMQ broker (broker-a of cluster C), not a name server; "
        "its name servers are a:1, b:2"
    )
    assert describe_broker("h:1", {}, {}) == "h:1 is a RocketMQ broker, not a name server"


async def test_the_probe_asks_runtime_info_then_config() -> None:
    asked: list[int] = []

    async def call(code: int) -> RemotingCommand:
        asked.append(code)
        if code == RequestCode.GET_BROKER_RUNTIME_INFO:
            body = {"table": {"brokerVersionDesc": "tidemq 0.1.0", "brokerName": "b"}}
            return answer(code, json.dumps(body).encode())
        return answer(code, b"brokerName=b\nbrokerClusterName=C\nnamesrvAddr=n:9876\n")

    said = await not_a_name_server("h:10911", REFUSAL, call)
    assert said == (
        "h:10911 is a tidemq broker (b of cluster C), not a name server; its name server is n:9876"
    )
    assert asked == [RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_CONFIG]


async def test_something_else_is_quoted() -> None:
    async def call(code: int) -> RemotingCommand:
        raise ClientError("connection lost", ResponseCode.RPC_UNKNOWN)

    said = await not_a_name_server("h:1", REFUSAL, call)
    assert said == "h:1 is not a name server: it answered 'request type 105 not supported'"


def test_foreign_protocols_are_named() -> None:
    assert foreign_peer("h:8081", "HTTP/2", "name server") == (
        "h:8081 is a gRPC (HTTP/2) endpoint, not a name server: it does not speak RocketMQ "
        "remoting (tidemq's name server listens on port 9876 unless told otherwise)"
    )
    assert foreign_peer("h:443", "TLS", "broker").startswith("h:443 is a TLS server, not a broker")
