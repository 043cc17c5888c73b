"""The two access-control hooks of the transport, over real loopback sockets: a client's
`sign` on every request it frames, and a server's `gate` before its handler table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tidemq.acl.credentials import Credentials
from tidemq.acl.signing import verify
from tidemq.protocol import RemotingCommand, ResponseCode
from tidemq.transport import Connection, RemotingClient, RemotingServer

ServerFactory = Callable[..., Awaitable[RemotingServer]]
ECHO = 1
CREDENTIALS = Credentials("accessKey1", "secretKey1")


async def _fields(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, request.ext_fields)


async def test_every_request_is_signed_and_the_callers_command_is_left_alone(
    make_server: ServerFactory,
) -> None:
    seen: list[RemotingCommand] = []

    async def record(request: RemotingCommand, connection: Connection) -> None:
        seen.append(request)

    server = await make_server({ECHO: _fields, 2: record})
    async with RemotingClient(sign=CREDENTIALS.sign) as client:
        address = f"127.0.0.1:{server.port}"
        command = RemotingCommand.request(ECHO, {"topic": "T"}, b"body")
        answer = await client.invoke(address, command)
        assert command.ext_fields == {"topic": "T"}  # not owned: not changed
        assert answer.ext_fields["AccessKey"] == "accessKey1"
        assert verify(answer.ext_fields, b"body", "secretKey1")

        connection = await client.connect(address)
        owned = RemotingCommand.request(ECHO, {"topic": "U"})
        answer = await connection.request(owned, 3.0, owned=True)
        assert verify(answer.ext_fields, b"", "secretKey1")

        await client.invoke_oneway(address, RemotingCommand.request(2, {"k": "v"}))
        second = await client.invoke(address, RemotingCommand.request(ECHO))  # after the oneway
        assert second.code == ResponseCode.SUCCESS
    assert len(seen) == 1 and verify(seen[0].ext_fields, b"", "secretKey1")


async def test_the_gate_answers_before_the_handler_and_the_connection_stays_open(
    make_server: ServerFactory,
) -> None:
    handled: list[int] = []

    async def handler(request: RemotingCommand, _connection: Connection) -> RemotingCommand:
        handled.append(request.code)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def gate(request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        assert connection.remote[0] == "127.0.0.1"
        if "AccessKey" in request.ext_fields:
            return None
        return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, "who are you")

    server = await make_server({ECHO: handler}, gate=gate)
    address = f"127.0.0.1:{server.port}"
    async with RemotingClient() as anonymous, RemotingClient(sign=CREDENTIALS.sign) as signed:
        refused = await anonymous.invoke(address, RemotingCommand.request(ECHO))
        assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "who are you")
        unknown = await anonymous.invoke(address, RemotingCommand.request(999))
        assert unknown.code == ResponseCode.NO_PERMISSION  # the gate sees every code
        assert handled == []
        assert (await signed.invoke(address, RemotingCommand.request(ECHO))).code == 0
        again = await anonymous.invoke(address, RemotingCommand.request(ECHO))
        assert again.code == ResponseCode.NO_PERMISSION
    assert handled == [ECHO]
