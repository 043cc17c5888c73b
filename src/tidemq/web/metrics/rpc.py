"""rocketmq_rpc_latency from the servers' RpcStats (tidemq.common.rpc_stats)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.metrics_core import Metric

from tidemq.common.histogram import Histogram
from tidemq.common.rpc_stats import RpcStats
from tidemq.web.metrics.exposition import Exposition, Labels, bool_label

__all__ = ["rpc_latency"]

RPC_LATENCY = "rocketmq_rpc_latency"


def _rows(stats: Sequence[RpcStats]) -> Iterator[tuple[Labels, Histogram]]:
    for rpc in stats:
        for (request, response, long_polling, oneway), histogram in list(rpc.table.items()):
            yield (
                {
                    "protocol_type": rpc.protocol,
                    "request_code": rpc.request_label(request),
                    "response_code": rpc.response_label(response),
                    "is_long_polling": bool_label(long_polling),
                    "result": "oneway" if oneway else "success",
                },
                histogram,
            )


def rpc_latency(exposition: Exposition, stats: Sequence[RpcStats]) -> Metric:
    """The histogram of every request answered by the servers of `stats`."""
    return exposition.histogram(RPC_LATENCY, "Rpc latency", _rows(stats), unit="milliseconds")
