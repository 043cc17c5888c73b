"""Master/slave replication of the commitlog (RocketMQ 4.x's HA).

A master listens on its HA port (`master.HaServer`); each slave connects
(`slave.HaClient`), reports the commitlog offset it has and receives the
master's commitlog from there as it is written (`tidemq.protocol.ha` is the
wire). The slave appends the bytes at the same offsets, so its commitlog files
are the master's byte for byte, and its store dispatches consumequeues and the
index from them. A SYNC_MASTER answers a send once a slave's report reaches
the message's end (`waits.ReplicaWaits`, over the pure `acks.AckBook`).

The pure decisions (where the master starts, whether a slave appends,
truncates or refuses) are in `decisions`.
"""
