"""RocketMQ message trace: what clients record of a message, and reading it back.

A producer or consumer made with ``enable_trace=True`` writes trace records
(who sent a message, when, how long it took, where it was stored; each
delivery to a consumer group with its retry count and outcome; a
transaction's end) to the trace topic, ``RMQ_SYS_TRACE_TOPIC`` unless
``trace_topic`` names another, in RocketMQ's trace data format, so traces
written by Java clients and by tidemq's read the same.

Modules: ``records.py`` (the format: encode, decode; sans-IO),
``dispatcher.py`` (batching and sending in the background), ``hooks.py``
(the records of a send, a consumption, a transaction's end), ``timeline.py``
(one message's Timeline from its records; pure) and ``reader.py``
(``trace_timeline``: query a cluster for it). ``tidemq message trace MSGID``
prints what ``trace_timeline`` returns.
"""

from tidemq.client.trace.reader import trace_timeline
from tidemq.client.trace.records import DEFAULT_TRACE_TOPIC
from tidemq.client.trace.timeline import (
    DeadLetter,
    Delivery,
    GroupTrace,
    RecallStep,
    SentStep,
    StoredStep,
    Timeline,
    TransactionStep,
)

__all__ = [
    "DEFAULT_TRACE_TOPIC",
    "DeadLetter",
    "Delivery",
    "GroupTrace",
    "RecallStep",
    "SentStep",
    "StoredStep",
    "Timeline",
    "TransactionStep",
    "trace_timeline",
]
