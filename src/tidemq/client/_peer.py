"""Say what answered, when an address given as the name server is not one.

A broker given as the name server answers every name-server request with
REQUEST_CODE_NOT_SUPPORTED (" request type 105 not supported"): true, but it
does not tell a newcomer what went wrong. Brokers, Java's and tidemq's alike,
answer GET_BROKER_RUNTIME_INFO (28) and GET_BROKER_CONFIG (26, Java
properties text with `brokerName`, `brokerClusterName` and `namesrvAddr`);
from those the error names the broker and, where it says, its name servers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping

from tidemq.client._wire import decode_body, first_line, remark
from tidemq.client.errors import ClientError
from tidemq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from tidemq.protocol.java_properties import parse_java_properties

__all__ = ["describe_broker", "not_a_name_server", "parse_java_properties"]

Call = Callable[[int], Awaitable[RemotingCommand]]
"""Send a request with this code (no header) to the address in question."""


def describe_broker(address: str, runtime: Mapping[str, str], config: Mapping[str, str]) -> str:
    """ "HOST:PORT is a tidemq broker (broker-a of DefaultCluster), not a name
    server; its name server is ..." from a broker's runtime info and config."""
    version = runtime.get("brokerVersionDesc") or config.get("brokerVersionDesc") or ""
    product = "a tidemq broker" if version.startswith("tidemq") else "a RocketMQ broker"
    name = config.get("brokerName") or runtime.get("brokerName")
    cluster = config.get("brokerClusterName") or runtime.get("clusterName")
    who = f" ({name} of cluster {cluster})" if name and cluster else f" ({name})" if name else ""
    servers = [s for s in (config.get("namesrvAddr") or "").replace(",", ";").split(";") if s]
    if len(servers) == 1:
        where = f"; its name server is {servers[0]}"
    elif servers:
        where = f"; its name servers are {', '.join(servers)}"
    else:
        where = ""
    return f"{address} is {product}{who}, not a name server{where}"


async def not_a_name_server(address: str, refusal: RemotingCommand, call: Call) -> str:
    """Why `address` refused a name-server request: a broker named as such
    when it answers as one, else the refusal's own words."""
    runtime: dict[str, str] = {}
    config: dict[str, str] = {}
    with contextlib.suppress(ClientError, ProtocolError, ValueError):
        response = await call(RequestCode.GET_BROKER_RUNTIME_INFO)
        if response.code == ResponseCode.SUCCESS:
            table = decode_body(response, "runtime info").get("table") or {}
            runtime = {str(k): str(v) for k, v in table.items()}
    if runtime:
        with contextlib.suppress(ClientError, ProtocolError, ValueError):
            response = await call(RequestCode.GET_BROKER_CONFIG)
            if response.code == ResponseCode.SUCCESS:
                config = parse_java_properties(response.body.decode("utf-8", "replace"))
        return describe_broker(address, runtime, config)
    said = first_line(refusal.remark) or remark(refusal)
    return f"{address} is not a name server: it answered {said!r}"
