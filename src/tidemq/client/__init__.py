"""Clients of a tidemq (or RocketMQ) cluster over the remoting protocol.

Today: `tidemq.client.admin.AdminClient`, the async administration client the
`tidemq` command is built on (topics, groups, routes, offsets, sending,
tailing and looking up messages). Producers and consumers come later.
"""
