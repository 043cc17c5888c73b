"""Issue #14 hazard 7: an orderly queue lock outlives its owner's connection.

Before the fix the broker freed a client's queue locks when its connection
closed: after a short network blip another consumer of the group locked the
queue at once while the first kept consuming until its next renewal (up to
20 s), so one queue was consumed by two consumers in parallel. Java's
RebalanceLockManager is touched only by LOCK_BATCH_MQ / UNLOCK_BATCH_MQ
(AdminBrokerProcessor) and expiry; a closed channel frees nothing.

Here against a real `tidemq serve`: consumer A locks every queue, its TCP
connection is cut, and consumer B of the same group gets no queue until A's
locks expire, while A, reconnected, renews them; an unlock frees at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand
from tidemq.protocol.heartbeat import ConsumerData, HeartbeatData, Subscription
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import serve
from tidemq.testing.waiting import eventually
from tidemq.transport import RemotingClient

pytestmark = pytest.mark.slow

GROUP = "OrderlyGroup"
TOPIC = "OrderlyTopic"
EXPIRY_S = 3.0
ASK_AGAIN_S = 0.1
"""B's pacing while A's locks live: the claim is that nothing is granted during a window
set by the broker's `queue_lock_expiry_s`, so real time has to pass (no event says
"still locked"); B asks every ASK_AGAIN_S of it."""


def lock_request(client_id: str, broker_name: str, code: int) -> RemotingCommand:
    queues = [{"topic": TOPIC, "brokerName": broker_name, "queueId": q} for q in range(4)]
    body = json.dumps({"consumerGroup": GROUP, "clientId": client_id, "mqSet": queues})
    return RemotingCommand.request(code, {}, body.encode())


async def lock(client: RemotingClient, broker: str, client_id: str, broker_name: str) -> set[int]:
    answer = await client.invoke(
        broker, lock_request(client_id, broker_name, RequestCode.LOCK_BATCH_MQ), timeout=10
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return {int(q["queueId"]) for q in json.loads(answer.body)["lockOKMQSet"]}


async def heartbeat(client: RemotingClient, broker: str, client_id: str) -> None:
    """Register `client_id` as an orderly consumer of the group on this connection."""
    consumer = ConsumerData(
        GROUP,
        consume_type="CONSUME_ACTIVELY",
        subscriptions=(Subscription(TOPIC),),
    )
    body = HeartbeatData(client_id, consumers=(consumer,)).encode()
    answer = await client.invoke(
        broker, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body), timeout=10
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def blip_scenario(broker: str, broker_name: str) -> None:
    owner = RemotingClient()
    rival = RemotingClient()
    try:
        await heartbeat(owner, broker, "A@1")
        await heartbeat(rival, broker, "B@2")
        assert await lock(owner, broker, "A@1", broker_name) == {0, 1, 2, 3}
        locked_at = time.monotonic()
        # the network blip: A's connection is gone without a word
        for connection in owner.connections.values():
            connection.abort()
        await probe_until_gone(rival, broker)
        # B asks again and again while A's locks are alive: never gets a queue
        while True:
            assert await lock(rival, broker, "B@2", broker_name) == set()
            if time.monotonic() - locked_at >= EXPIRY_S * 0.6:
                break
            await asyncio.sleep(ASK_AGAIN_S)  # see ASK_AGAIN_S: a window, not a wait
        # A is back (a new connection) and renews in time: it keeps every queue
        assert await lock(owner, broker, "A@1", broker_name) == {0, 1, 2, 3}
        assert await lock(rival, broker, "B@2", broker_name) == set()

        # A stops renewing: after the expiry B takes over
        async def rival_took_over() -> bool:
            return await lock(rival, broker, "B@2", broker_name) == {0, 1, 2, 3}

        await eventually(rival_took_over, "B to get A's expired locks", interval=0.2)
        # an owner's unlock frees at once
        unlock = lock_request("B@2", broker_name, RequestCode.UNLOCK_BATCH_MQ)
        answer = await rival.invoke(broker, unlock, timeout=10)
        assert answer.code == ResponseCode.SUCCESS
        assert await lock(owner, broker, "A@1", broker_name) == {0, 1, 2, 3}
    finally:
        await owner.close()
        await rival.close()


async def probe_until_gone(client: RemotingClient, broker: str) -> None:
    """Wait until the broker has seen A's connection close (A left the group)."""
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}
    )

    async def only_b() -> bool:
        answer = await client.invoke(broker, request, timeout=10)
        return bool(json.loads(answer.body)["consumerIdList"] == ["B@2"])

    await eventually(only_b, "the broker to see A's connection close", interval=0.02)


def test_a_closed_connection_does_not_free_its_locks(tmp_path: Path) -> None:
    settings = {"queue_lock_expiry_s": EXPIRY_S, "broker_name": "lock-broker"}
    with serve(tmp_path / "data", settings=settings) as server:
        asyncio.run(create_topic(server.namesrv, TOPIC, queues=4))
        asyncio.run(blip_scenario(server.broker, "lock-broker"))
        assert server.popen.poll() is None
