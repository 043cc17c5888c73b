"""The broker's send stamp for third-party clients, against a real `tidemq
serve --set region_id=eu-1`: what ali-ons (Node, 4.x remoting) and the
official 5.x Python gRPC client send is stored with MSG_REGION=eu-1 and
TRACE_ON=true, as pulled back by tidemq's client (a system property the
gRPC client sets itself is refused by the endpoint, as by RocketMQ's proxy).
(The Python client: tests/integration/test_send_stamp.py.)"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator

import pytest
from ali_ons_harness import ScriptRunner, TidemqServer, unique
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from tidemq.common import properties as props
from tidemq.common.message import MessageExt
from tidemq.testing.client_support import read_topic
from tidemq.testing.waiting import eventually

pytestmark = pytest.mark.slow

REGION = "eu-1"
STAMP = (REGION, "true")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidemqServer]:
    """This module's server: the interop one, with a region of its own."""
    data_dir = tmp_path_factory.mktemp("interop-stamp") / "data"
    verbose = bool(os.environ.get("TIDEMQ_INTEROP_VERBOSE"))
    srv = TidemqServer(data_dir, verbose=verbose, extra_args=["--set", f"region_id={REGION}"])
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def stamps(messages: list[MessageExt]) -> dict[str, tuple[str | None, str | None]]:
    """label (or body) -> (MSG_REGION, TRACE_ON) as stored."""
    return {
        m.properties.get("label", m.body.decode(errors="replace")): (
            m.properties.get(props.MSG_REGION),
            m.properties.get(props.TRACE_ON),
        )
        for m in messages
    }


async def stored(namesrv: str, topic: str, count: int) -> list[MessageExt]:
    async def found() -> list[MessageExt] | None:
        messages = await read_topic(namesrv, topic)
        return messages if len(messages) >= count else None

    return await eventually(found, f"{count} messages in {topic}")


@pytest.mark.skipif(shutil.which("node") is None, reason="`node` is not installed")
def test_what_ali_ons_sends_is_stored_with_the_stamp(
    scripts: ScriptRunner, server: TidemqServer
) -> None:
    topic = unique("IT_Stamp")
    server.create_topic(topic, queues=2)
    script = scripts.run("ali_producer_send", timeout=60, topic=topic, group=unique("stamp"))
    sent = {event["label"] for event in script.of_kind("sent")}
    assert sent == {"plain", "zip", "skip", "last"}, script.describe()
    messages = asyncio.run(stored(server.namesrv, topic, 4))
    assert stamps(messages) == dict.fromkeys(sent, STAMP)


def test_what_the_official_grpc_client_sends_is_stored_with_the_stamp(
    server: TidemqServer,
) -> None:
    topic = unique("IT_StampGrpc")
    server.create_topic(topic, queues=2)
    producer = Producer(ClientConfiguration(server.grpc, Credentials()), (topic,))
    producer.startup()
    try:
        for label in ("grpc-0", "grpc-1"):
            message = Message()
            message.topic = topic
            message.body = label.encode()
            message.add_property("label", label)
            producer.send(message)
    finally:
        producer.shutdown()
    messages = asyncio.run(stored(server.namesrv, topic, 2))
    assert stamps(messages) == {"grpc-0": STAMP, "grpc-1": STAMP}
