"""/metrics: RocketMQ 5's broker metrics (and tidemq's name server's) for Prometheus.

Collectors build prometheus_client families when scraped from the counters
the servers keep with plain integer adds (tidemq.broker.stats,
tidemq.common.rpc_stats); see docs/metrics.md for the list and how each maps
to RocketMQ's.
"""

from tidemq.web.metrics.broker_collector import BrokerCollector, broker_labels
from tidemq.web.metrics.broker_traffic import ConsumerClient
from tidemq.web.metrics.merged import MergedFamilies
from tidemq.web.metrics.namesrv_collector import NamesrvCollector

__all__ = [
    "BrokerCollector",
    "ConsumerClient",
    "MergedFamilies",
    "NamesrvCollector",
    "broker_labels",
]
