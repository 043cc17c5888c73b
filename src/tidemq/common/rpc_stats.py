"""RPC latency of one server (remoting or gRPC): what rocketmq_rpc_latency shows.

RocketMQ 5 records every answered request into the histogram
`rocketmq_rpc_latency` (unit milliseconds, buckets 1, 3, 5, 7, 10, 100,
1000, 2000, 3000 ms) with the labels protocol_type, request_code,
response_code, is_long_polling and result (apache/rocketmq
remoting/.../metrics/RemotingMetricsManager.java, NettyRemotingAbstract.
writeResponse). This is its counting side: one `Histogram` per
(request, response, long polling, oneway), found in a dict and bumped with
plain adds, so a request pays a dict lookup and a bisect. The server that
owns an `RpcStats` gives it how to name its codes (`request_label`,
`response_label`); the exposition reads `table` at scrape time.

Unlike Java, which truncates the elapsed time to whole milliseconds before
recording it, the fraction is kept: a 1.6 ms answer lands in the 3 ms
bucket, not the 1 ms one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from tidemq.common.histogram import Histogram

__all__ = ["RPC_LATENCY_BOUNDS_MS", "RpcKey", "RpcStats"]

RPC_LATENCY_BOUNDS_MS: tuple[float, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
"""RemotingMetricsManager.getMetricsView's rpcCostTimeBuckets."""

RpcKey = tuple[Hashable, int, bool, bool]
"""(request, response code, answered after long polling, oneway)."""


class RpcStats:
    """Latency histograms of one protocol's requests, keyed as `RpcKey`."""

    __slots__ = ("protocol", "request_label", "response_label", "table")

    def __init__(
        self,
        protocol: str,
        request_label: Callable[[Any], str],
        response_label: Callable[[int], str],
    ) -> None:
        self.protocol = protocol
        """RocketMQ's protocol_type label: "remoting" (or tidemq's "grpc")."""
        self.request_label = request_label
        self.response_label = response_label
        self.table: dict[RpcKey, Histogram] = {}

    def record(
        self,
        request: Hashable,
        response: int,
        elapsed_ms: float,
        long_polling: bool = False,
        oneway: bool = False,
    ) -> None:
        key = (request, response, long_polling, oneway)
        histogram = self.table.get(key)
        if histogram is None:
            histogram = self.table[key] = Histogram(RPC_LATENCY_BOUNDS_MS)
        histogram.observe(elapsed_ms)
