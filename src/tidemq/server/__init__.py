"""The composition root: processes built from the layers below.

`server.broker.Broker` wires one broker process (the store, the broker's
parts from `broker.assembly`, the remoting server over their processors,
the background tasks, and the gRPC endpoint when configured). It lives above
both `broker` and `grpc`, so neither of those imports the other's way up:
`grpc` translates onto `broker.processors`, and only this package knows
that a broker process serves both.
"""
