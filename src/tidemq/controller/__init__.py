"""RocketMQ 5's controller: elects a broker set's master among its in-sync replicas.

`state` is the pure state machine (replicas, master, epochs, SyncStateSet),
`raft` makes it durable and agreed by a majority (pysyncobj), `liveness`
says who is alive, `service` answers the controller's request codes and
re-elects when a master dies. It runs inside a name server
(``tidemq namesrv --enable-controller``).
"""
