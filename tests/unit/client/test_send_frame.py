"""SendCommand writes the same frame bytes as the general encoder, whatever the send."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemq.client._send import SendCodec
from tidemq.client._send_frame import SendCommand
from tidemq.common.clock import ManualClock
from tidemq.common.message import Message
from tidemq.common.message_id import UniqueIdGenerator
from tidemq.protocol import ProtocolError, RemotingCommand, SerializeType
from tidemq.protocol.command import CommandDecoder

TOPIC_CHARS = st.sampled_from("abcXYZ019_-%|")
TEXT = st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), min_size=1)


def general(command: RemotingCommand) -> tuple[bytes, bytes] | str:
    try:
        return RemotingCommand.encode_parts(command)
    except ProtocolError as exc:
        return f"ProtocolError: {exc}"


def shortcut(command: RemotingCommand) -> tuple[bytes, bytes] | str:
    try:
        return command.encode_parts()
    except ProtocolError as exc:
        return f"ProtocolError: {exc}"


@settings(max_examples=300, deadline=None)
@given(
    group=st.text(TOPIC_CHARS, min_size=1, max_size=40),
    topic=st.text(TOPIC_CHARS, min_size=1, max_size=60).filter(lambda t: t != "TBW102"),
    properties=st.dictionaries(
        st.text(st.sampled_from("abkQZ_é\x7f"), min_size=1, max_size=8), TEXT, max_size=4
    ),
    tags=st.one_of(st.none(), TEXT),
    body=st.binary(min_size=1, max_size=64),
    user_flag=st.integers(-(2**31), 2**31 - 1),
    queue_id=st.integers(0, 1023),
    born_ms=st.integers(0, 2**62),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    retry=st.booleans(),
)
def test_a_send_frame_is_the_general_encoders_frame(
    group: str,
    topic: str,
    properties: dict[str, str],
    tags: str | None,
    body: bytes,
    user_flag: int,
    queue_id: int,
    born_ms: int,
    opaque: int,
    flag: int,
    retry: bool,
) -> None:
    """Non-ASCII and DEL characters, any ints, retry topics (more header fields)."""
    clock = ManualClock()
    codec = SendCodec(group, UniqueIdGenerator(clock, ip=b"\x0a\x00\x00\x01").next_id)
    if retry:
        topic = f"%RETRY%{topic}"[:127]
        properties = {**properties, "RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "16"}
    message = Message(topic, body, flag=user_flag, properties=dict(properties))
    if tags:
        message.tags = tags
    command = codec.prepare(message).request(queue_id, born_ms)
    assert type(command) is SendCommand
    command.opaque, command.flag = opaque, flag
    fast = shortcut(command)
    assert fast == general(command)
    if isinstance(fast, tuple):
        decoded = CommandDecoder().feed(fast[0] + fast[1])
        assert len(decoded) == 1
        assert decoded[0].ext_fields == command.ext_fields
        assert (decoded[0].opaque, decoded[0].flag) == (opaque, flag)


def _send_command(**changes: object) -> SendCommand:
    codec = SendCodec("PG", UniqueIdGenerator(ManualClock(), ip=b"\x0a\x00\x00\x01").next_id)
    command = codec.prepare(Message("T", b"x")).request(1, 2)
    changed = dataclasses.replace(command, **changes)  # type: ignore[arg-type]
    assert isinstance(changed, SendCommand)
    return changed


@pytest.mark.parametrize(
    "changes",
    [
        {"remark": "a remark"},
        {"serialize_type": SerializeType.ROCKETMQ},
        {"language": "PYTHÖN"},
        {"version": 2**31},
        {"opaque": 2**31},
        {"flag": -(2**31) - 1},
        {"ext_fields": {"a": "\ud800"}},
        {"ext_fields": {"a": "x\x7fy"}},
        {"body": b"x" * (16 * 1024 * 1024)},
    ],
)
def test_what_the_shortcut_leaves_to_the_general_encoder(changes: dict[str, object]) -> None:
    """Each case fails one of the shortcut's conditions; the bytes (or the error) are the same."""
    command = _send_command(**changes)
    assert type(command) is SendCommand
    assert shortcut(command) == general(command)
