"""The producer's direct path: `live_connection` and `request(owned=True)`."""

from __future__ import annotations

from collections.abc import Callable

from transport_helpers import echo

from tidemq.protocol import RemotingCommand
from tidemq.transport import RemotingClient, RemotingServer

FAST = 1


async def test_live_connection_is_none_until_connected_and_after_close(
    make_server: Callable[..., RemotingServer], make_client: Callable[..., RemotingClient]
) -> None:
    server = await make_server({FAST: echo()})  # type: ignore[misc]
    client = make_client()
    address = f"127.0.0.1:{server.port}"
    assert client.live_connection(address) is None
    connection = await client.connect(address)
    assert client.live_connection(address) is connection
    connection.close()
    assert client.live_connection(address) is None


async def test_an_owned_command_goes_out_as_is_with_its_opaque_set(
    make_server: Callable[..., RemotingServer], make_client: Callable[..., RemotingClient]
) -> None:
    server = await make_server({FAST: echo()})  # type: ignore[misc]
    client = make_client()
    connection = await client.connect(f"127.0.0.1:{server.port}")
    owned = RemotingCommand.request(FAST, {"a": "1"}, body=b"x")
    owned.flag = 3  # response and oneway bits: a request clears them
    response = await connection.request(owned, 5.0, owned=True)
    assert owned.opaque == response.opaque != 0
    assert owned.flag == 0
    assert response.ext_fields == {"a": "1"} and response.body == b"x"
    kept = RemotingCommand.request(FAST, {"b": "2"})
    again = await connection.request(kept, 5.0)
    assert (kept.opaque, kept.flag) == (0, 0)
    assert again.opaque != response.opaque
