"""tidemq: a RocketMQ-compatible message queue written in Python.

The client library is exported here (imported lazily, so ``import tidemq``
and the CLI stay fast)::

    from tidemq import Producer, PushConsumer, ConsumeStatus, make_message

    with Producer("PG", namesrv="127.0.0.1:9876") as producer:
        producer.send(make_message("TopicTest", b"hello", tags="TagA"))

Every class has an asyncio twin (``AsyncProducer``, ``AsyncPushConsumer``,
``AsyncLitePullConsumer``, ``AdminClient``); the blocking classes run that
same core on a loop thread. Every failure is a :class:`ClientError` with a
readable message and a RocketMQ response code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tidemq.common.version import __version__

_EXPORTS: dict[str, str] = {
    # messages and errors
    "Message": "tidemq.common.message",
    "MessageExt": "tidemq.common.message",
    "MessageQueue": "tidemq.common.message",
    "ClientError": "tidemq.client.errors",
    "SendResult": "tidemq.client.model",
    "SendStatus": "tidemq.client.model",
    "ClientConfig": "tidemq.client.instance",
    "Credentials": "tidemq.acl.credentials",
    "TlsConfig": "tidemq.transport.tls",
    # producer
    "AsyncProducer": "tidemq.client.producer",
    "Producer": "tidemq.client.producer",
    "make_message": "tidemq.client.producer",
    "MessageQueueSelector": "tidemq.client.producer",
    # transactional messages
    "AsyncTransactionProducer": "tidemq.client.transaction",
    "TransactionProducer": "tidemq.client.transaction",
    "TransactionListener": "tidemq.client.transaction",
    "LocalTransactionState": "tidemq.client.transaction",
    "TransactionSendResult": "tidemq.client.transaction",
    # consumers
    "AsyncPushConsumer": "tidemq.client.consumer.push",
    "PushConsumer": "tidemq.client.consumer.push",
    "AsyncLitePullConsumer": "tidemq.client.consumer.lite_pull",
    "LitePullConsumer": "tidemq.client.consumer.lite_pull",
    "AsyncSimpleConsumer": "tidemq.client.consumer.simple",
    "SimpleConsumer": "tidemq.client.consumer.simple",
    "ReceivedMessage": "tidemq.client.consumer.simple",
    "ConsumeStatus": "tidemq.client.consumer.listener",
    "ConsumeOrderlyStatus": "tidemq.client.consumer.listener",
    "ConsumeConcurrentlyContext": "tidemq.client.consumer.listener",
    "ConsumeOrderlyContext": "tidemq.client.consumer.listener",
    "ConsumeHook": "tidemq.client.consumer.listener",
    "MessageModel": "tidemq.client.consumer.listener",
    "ConsumeFromWhere": "tidemq.client._core.rebalance",
    "SubscriptionSpec": "tidemq.client.consumer.subscription",
    # allocation strategies
    "AllocateStrategy": "tidemq.client._core.allocation",
    "Averagely": "tidemq.client._core.allocation",
    "AveragelyByCircle": "tidemq.client._core.allocation",
    "ConsistentHash": "tidemq.client._core.allocation",
    "ByConfig": "tidemq.client._core.allocation",
    "ByMachineRoom": "tidemq.client._core.allocation",
    "MachineRoomNearby": "tidemq.client._core.allocation",
    # administration
    "AdminClient": "tidemq.client.admin",
    # message trace
    "Timeline": "tidemq.client.trace",
    "trace_timeline": "tidemq.client.trace",
}

__all__ = [
    "AdminClient",
    "AllocateStrategy",
    "AsyncLitePullConsumer",
    "AsyncProducer",
    "AsyncPushConsumer",
    "AsyncSimpleConsumer",
    "AsyncTransactionProducer",
    "Averagely",
    "AveragelyByCircle",
    "ByConfig",
    "ByMachineRoom",
    "ClientConfig",
    "ClientError",
    "ConsistentHash",
    "ConsumeConcurrentlyContext",
    "ConsumeFromWhere",
    "ConsumeHook",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "Credentials",
    "LitePullConsumer",
    "LocalTransactionState",
    "MachineRoomNearby",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "Producer",
    "PushConsumer",
    "ReceivedMessage",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "SubscriptionSpec",
    "Timeline",
    "TlsConfig",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "__version__",
    "make_message",
    "trace_timeline",
]

if TYPE_CHECKING:
    from tidemq.acl.credentials import Credentials
    from tidemq.client._core.allocation import (
        AllocateStrategy,
        Averagely,
        AveragelyByCircle,
        ByConfig,
        ByMachineRoom,
        ConsistentHash,
        MachineRoomNearby,
    )
    from tidemq.client._core.rebalance import ConsumeFromWhere
    from tidemq.client.admin import AdminClient
    from tidemq.client.consumer.listener import (
        ConsumeConcurrentlyContext,
        ConsumeHook,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        ConsumeStatus,
        MessageModel,
    )
    from tidemq.client.consumer.lite_pull import AsyncLitePullConsumer, LitePullConsumer
    from tidemq.client.consumer.push import AsyncPushConsumer, PushConsumer
    from tidemq.client.consumer.simple import AsyncSimpleConsumer, ReceivedMessage, SimpleConsumer
    from tidemq.client.consumer.subscription import SubscriptionSpec
    from tidemq.client.errors import ClientError
    from tidemq.client.instance import ClientConfig
    from tidemq.client.model import SendResult, SendStatus
    from tidemq.client.producer import AsyncProducer, MessageQueueSelector, Producer, make_message
    from tidemq.client.trace import Timeline, trace_timeline
    from tidemq.client.transaction import (
        AsyncTransactionProducer,
        LocalTransactionState,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
    )
    from tidemq.common.message import Message, MessageExt, MessageQueue
    from tidemq.transport.tls import TlsConfig


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tidemq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
