"""Clients of a tidemq (or RocketMQ 4.x/5.x) cluster over the remoting protocol.

Layout: ``instance.py`` (what one client object shares: connections, routes,
heartbeats), ``producer.py``, ``consumer/`` (push and lite pull consumers and
their pieces), ``admin.py`` (the admin client the CLI is built on),
``_core/`` (pure policy: allocation, queue selection, process queue, backoff),
``_loop.py`` (the loop thread behind the blocking classes). The public names
are exported from the top-level ``tidemq`` package.
"""
