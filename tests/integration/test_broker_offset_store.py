"""BrokerOffsetStore against a real `tidemq serve` process: reads, synchronous
and oneway persists, what persist_all forgets, and an unreachable broker.

(Named test_broker_offset_store.py: tests/unit/client/consumer holds a
test_offset_store.py and test modules need distinct names.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tidemq.client.admin import AdminClient
from tidemq.client.consumer.offset_store import BrokerOffsetStore, ReadOffsetType
from tidemq.client.errors import ClientError
from tidemq.client.instance import ClientConfig, ClientInstance
from tidemq.testing.client_support import create_topic
from tidemq.testing.processes import ServerProcess, serve
from tidemq.testing.waiting import eventually, unique_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve(tmp_path_factory.mktemp("offsets") / "data") as process:
        yield process


@pytest.fixture
async def instance(server: ServerProcess) -> AsyncIterator[ClientInstance]:
    client = ClientInstance(ClientConfig(namesrv=server.namesrv))
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def stored_offsets(server: ServerProcess, group: str, topic: str) -> dict[int, int]:
    async with AdminClient(server.namesrv) as admin:
        rows = await admin.consumer_progress(group, topic)
    return {row.queue_id: row.consumer_offset for row in rows}


async def test_sync_persist_is_read_back_by_another_client(
    server: ServerProcess, instance: ClientInstance
) -> None:
    mq0, mq1 = await create_topic(server.namesrv, unique_name("OffsetStoreTopic"), queues=2)
    group = unique_name("cg_store")
    store = BrokerOffsetStore(instance, group)
    await store.load()
    # A fresh queue (min offset 0) reads as 0: the broker's rule for new groups.
    assert await store.read(mq0, ReadOffsetType.READ_FROM_STORE) == 0
    store.update(mq0, 7)
    store.update(mq1, 3)
    await store.persist(mq0, oneway=False)
    await store.persist(mq1, oneway=False)

    other = ClientInstance(ClientConfig(namesrv=server.namesrv))
    try:
        reader = BrokerOffsetStore(other, group)
        assert await reader.read(mq0, ReadOffsetType.READ_FROM_MEMORY) == -1
        assert await reader.read(mq0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 7
        assert await reader.read(mq0, ReadOffsetType.READ_FROM_MEMORY) == 7
        assert await reader.read(mq1, ReadOffsetType.READ_FROM_STORE) == 3
        assert reader.table(mq0.topic) == {mq0: 7, mq1: 3}
    finally:
        await other.close()
    assert await stored_offsets(server, group, mq0.topic) == {0: 7, 1: 3}


async def test_oneway_persist_all_lands_and_forgets_queues_not_named(
    server: ServerProcess, instance: ClientInstance
) -> None:
    mq0, mq1 = await create_topic(server.namesrv, unique_name("OffsetStoreTopic"), queues=2)
    group = unique_name("cg_oneway")
    store = BrokerOffsetStore(instance, group)
    store.update(mq0, 11)
    store.update(mq1, 5)
    await store.persist_all([mq0])
    assert store.table() == {mq0: 11}  # mq1 is no longer this consumer's

    async def landed() -> bool:
        return (await stored_offsets(server, group, mq0.topic)).get(0) == 11

    await eventually(landed, "the oneway offset update")
    assert (await stored_offsets(server, group, mq0.topic)).get(1, -1) <= 0


async def test_increase_only_and_remove(server: ServerProcess, instance: ClientInstance) -> None:
    mq0, _ = await create_topic(server.namesrv, unique_name("OffsetStoreTopic"), queues=2)
    store = BrokerOffsetStore(instance, unique_name("cg_mono"))
    store.update(mq0, 10, increase_only=True)
    store.update(mq0, 4, increase_only=True)
    assert store.table() == {mq0: 10}
    store.update(mq0, 4)
    assert store.table() == {mq0: 4}
    store.remove(mq0)
    assert await store.read(mq0, ReadOffsetType.READ_FROM_MEMORY) == -1
    await store.persist(mq0, oneway=False)  # nothing in memory: nothing sent, no error


async def test_unreachable_broker_is_a_client_error(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as doomed:
        topic = unique_name("DoomedTopic")
        async with AdminClient(doomed.namesrv) as admin:
            await admin.create_topic(topic, queues=1)
        client = ClientInstance(ClientConfig(namesrv=doomed.namesrv, request_timeout_s=2.0))
        try:
            mq = (await client.route(topic)).read_queues()[0]
            store = BrokerOffsetStore(client, "cg_doomed")
            store.update(mq, 2)
            doomed.kill()
            with pytest.raises(ClientError) as read_error:
                await store.read(mq, ReadOffsetType.READ_FROM_STORE)
            assert read_error.value.transport_failure
            with pytest.raises(ClientError) as persist_error:
                await store.persist(mq, oneway=False)
            assert persist_error.value.transport_failure
            await store.persist(mq)  # oneway: logged, not raised
            assert await store.read(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 2
        finally:
            await client.close()
