"""Wire helpers of the admin client: its error, the request headers the
protocol package lacks, fastjson-tolerant JSON and small parsers.

Bodies are parsed leniently: Java's fastjson writes maps keyed by objects
(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}`) and
unquoted numeric keys (`"brokerAddrs":{0:"host:port"}`), which standard JSON
refuses; both forms, and standard JSON with such keys as strings (what the
tidemq broker writes), are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from tidemq.client.errors import TRANSPORT_CODES, ClientError
from tidemq.common.message import MessageExt, MessageQueue
from tidemq.protocol import ProtocolError, RemotingCommand, ResponseCode
from tidemq.protocol.codes import response_code_name
from tidemq.record.records import decode_records
from tidemq.transport.client import RemotingClient
from tidemq.transport.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingForeignProtocolError,
    RemotingTimeoutError,
)

__all__ = [
    "CALL_FAILURES",
    "TRANSPORT_CODES",
    "AdminError",
    "ClientError",
    "call",
    "call_error",
    "first_answer",
]

T = TypeVar("T")


class AdminError(ClientError):
    """A failed admin call (a ClientError; kept as its own name for the CLI)."""


async def call(
    remoting: RemotingClient,
    address: str,
    command: RemotingCommand,
    timeout: float,
    *,
    role: str = "broker",
    error: type[ClientError] = ClientError,
) -> RemotingCommand:
    """One request; a failure to get any answer becomes an `error` with an RPC_* code."""
    try:
        return await remoting.invoke(address, command, timeout=timeout)
    except CALL_FAILURES as exc:
        raise call_error(exc, address, timeout, role=role, error=error) from exc


CALL_FAILURES = (RemotingError, ProtocolError, OSError)
"""What a request can fail with before any answer arrives (see `call_error`)."""


def call_error(
    exc: BaseException,
    address: str,
    timeout: float,
    *,
    role: str = "broker",
    error: type[ClientError] = ClientError,
) -> ClientError:
    """The `error` (RPC_* code) standing for a request to `address` that got no
    answer; `exc` is one of CALL_FAILURES. Shared by `call` and the producer's
    direct path, so both report failures alike."""
    if isinstance(exc, RemotingConnectError):
        return error(
            f"cannot reach the {role} at {address} ({connect_reason(exc)})",
            ResponseCode.RPC_SEND_TO_CHANNEL_FAILED,
        )
    if isinstance(exc, RemotingTimeoutError):
        return error(
            f"the {role} at {address} did not answer within {timeout:g} s",
            ResponseCode.RPC_TIME_OUT,
        )
    if isinstance(exc, RemotingForeignProtocolError):
        return error(foreign_peer(address, exc.protocol, role), ResponseCode.RPC_UNKNOWN)
    return error(
        f"request to the {role} at {address} failed ({first_line(str(exc)) or exc!r})",
        ResponseCode.RPC_UNKNOWN,
    )


async def first_answer(
    addresses: Sequence[str],
    attempt: Callable[[str], Awaitable[T]],
    error: type[ClientError] = ClientError,
) -> tuple[int, T]:
    """Try `addresses` in order until one answers: (its index, the answer).

    A transport failure moves on to the next address; any other error is
    raised at once. When none answers, the one failure (or a summary of all)
    is raised.
    """
    failures: list[ClientError] = []
    for index, address in enumerate(addresses):
        try:
            return index, await attempt(address)
        except ClientError as exc:
            if not exc.transport_failure:
                raise
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    details = "; ".join(f.message for f in failures)
    raise error(f"cannot reach any name server: {details}", failures[-1].code)


# -- small pure helpers -----------------------------------------------------------

_ADDRESS = re.compile(r"^(?P<host>[^\s:]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")


def parse_address_list(text: str | Sequence[str]) -> list[str]:
    """Split "h1:p1;h2:p2" (RocketMQ's separator; commas too) into checked addresses."""
    parts = [text] if isinstance(text, str) else list(text)
    result: list[str] = []
    for part in parts:
        for item in re.split(r"[;,\s]+", part):
            if not item:
                continue
            match = _ADDRESS.match(item)
            if match is None or not 0 < int(match["port"]) < 65536:
                raise ValueError(f"{item!r} is not a HOST:PORT address")
            result.append(item)
    if not result:
        raise ValueError("no address given")
    return result


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def remark(response: RemotingCommand) -> str:
    return first_line(response.remark) or f"request failed: {response_code_name(response.code)}"


_DEFAULT_PORTS = {"name server": 9876, "broker": 10911}
_PEER_KINDS = {
    "HTTP/2": "a gRPC (HTTP/2) endpoint",
    "HTTP/1.x": "an HTTP server",
    "TLS": "a TLS server",
}


def foreign_peer(address: str, protocol: str, role: str) -> str:
    """What to say when `address`, asked as a `role`, spoke another protocol."""
    kind = _PEER_KINDS.get(protocol, f"a {protocol} server")
    port = _DEFAULT_PORTS.get(role)
    usual = f" (tidemq's {role} listens on port {port} unless told otherwise)" if port else ""
    return f"{address} is {kind}, not a {role}: it does not speak RocketMQ remoting{usual}"


def connect_reason(exc: BaseException) -> str:
    """A short reason for a failed connection: "connection refused", "timed out"..."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, TimeoutError):
            return "connect timed out"
        if (
            isinstance(current, OSError)
            and not isinstance(current, ConnectionError)
            and current.strerror
        ):
            return current.strerror.lower()
        current = current.__cause__ or current.__context__
    text = first_line(str(exc))
    lowered = text.lower()
    if "refused" in lowered or "errno 111" in lowered:
        return "connection refused"
    if "timed out" in lowered:
        return "connect timed out"
    return text or type(exc).__name__


def attributes_text(attributes: Mapping[str, str] | None) -> str | None:
    """Java AttributeParser.parseToString: "+k=v,+k2" (callers give the +/- prefix)."""
    if not attributes:
        return None
    return ",".join(f"{k}={v}" if v else k for k, v in attributes.items())


# -- lenient JSON (fastjson output) ---------------------------------------------------

_MAX_DEPTH = 64


def loads_lenient(data: bytes | str) -> Any:
    """JSON, or fastjson's superset: object and bare-number keys (made into text keys).

    A key that is an object or array becomes its canonical JSON text (sorted
    keys, no spaces); a number key becomes its digits. Raises ValueError.
    """
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    try:
        return json.loads(text)
    except ValueError:
        pass
    parser = _LenientJson(text)
    value = parser.value(0)
    parser.skip_ws()
    if parser.pos != len(text):
        raise ValueError(f"trailing data at {parser.pos}")
    return value


class _LenientJson:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.decoder = json.JSONDecoder()

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ValueError("JSON nests too deep")
        self.skip_ws()
        if self.pos >= len(self.text):
            raise ValueError("unexpected end of JSON")
        char = self.text[self.pos]
        if char == "{":
            return self.object(depth)
        if char == "[":
            return self.array(depth)
        try:
            value, self.pos = self.decoder.raw_decode(self.text, self.pos)
        except ValueError:
            raise ValueError(f"unexpected {char!r} at {self.pos}") from None
        return value

    def object(self, depth: int) -> dict[str, Any]:
        self.pos += 1
        result: dict[str, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            key = self.value(depth + 1)
            self.expect(":")
            result[_key_text(key)] = self.value(depth + 1)
            self.skip_ws()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            self.expect(",")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth + 1))
            self.skip_ws()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            self.expect(",")

    def expect(self, char: str) -> None:
        self.skip_ws()
        if not self.text.startswith(char, self.pos):
            raise ValueError(f"expected {char!r} at {self.pos}")
        self.pos += 1


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, dict | list):
        return json.dumps(key, sort_keys=True, separators=(",", ":"))
    return json.dumps(key)


def message_queue_key(key: str) -> MessageQueue:
    """A MessageQueue map key: JSON object text {"brokerName","queueId","topic"}."""
    try:
        raw = json.loads(key)
        return MessageQueue(str(raw["topic"]), str(raw["brokerName"]), int(raw["queueId"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"not a MessageQueue key: {key[:80]!r}") from exc


def decode_body(response: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        document = loads_lenient(response.body) if response.body else {}
    except ValueError as exc:
        raise AdminError(f"malformed {what} body: {exc}", ResponseCode.SYSTEM_ERROR) from None
    if not isinstance(document, dict):
        raise AdminError(f"malformed {what} body: not an object", ResponseCode.SYSTEM_ERROR)
    return document


def as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def check(response: RemotingCommand) -> RemotingCommand:
    """`response` if it is a SUCCESS, else its AdminError."""
    if response.code != ResponseCode.SUCCESS:
        raise AdminError(remark(response), response.code)
    return response


def decode_messages(body: bytes, address: str) -> list[MessageExt]:
    """The stored records of a pull/query body, bodies inflated."""
    try:
        return decode_records(body, decompress=True)
    except ProtocolError as exc:
        raise AdminError(
            f"malformed messages from the broker at {address}: {exc}", ResponseCode.SYSTEM_ERROR
        ) from None
