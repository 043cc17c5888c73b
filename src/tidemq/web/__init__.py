"""The broker's HTTP side: /metrics (Prometheus), the JSON API and the dashboard.

One aiohttp server in the broker's process and event loop (`HttpEndpoint`),
so a scrape or a page reads the broker's own tables directly, with no client
round trip. Sits beside `grpc` in the layer table: it may use the broker,
the client and the name server, and only `server` (the composition root)
starts it.
"""

from tidemq.web.endpoint import HttpEndpoint

__all__ = ["HttpEndpoint"]
