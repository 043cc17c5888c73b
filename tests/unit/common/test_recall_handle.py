"""The recall handle is Java's HandleV1: base64url of "v1 topic broker time id"."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.common.recall_handle import RecallHandle, RecallHandleError

_word = st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=12)


@given(_word, _word, st.integers(0, 2**62), _word)
def test_round_trip(topic: str, broker: str, deliver_ms: int, key: str) -> None:
    handle = RecallHandle(topic, broker, deliver_ms, key)
    assert RecallHandle.decode(handle.encode()) == handle


def test_the_wire_format_is_javas() -> None:
    encoded = RecallHandle("TopicA", "broker-a", 1700000000000, "ABC123").encode()
    assert base64.urlsafe_b64decode(encoded).decode() == "v1 TopicA broker-a 1700000000000 ABC123"
    # a handle Java built decodes too
    java = base64.urlsafe_b64encode(b"v1 T b 42 ID").decode()
    assert RecallHandle.decode(java) == RecallHandle("T", "b", 42, "ID")


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "%%%",
        base64.urlsafe_b64encode(b"v2 T b 42 ID").decode(),
        base64.urlsafe_b64encode(b"v1 T b 42").decode(),
        base64.urlsafe_b64encode(b"v1 T b soon ID").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_garbage_is_refused_readably(handle: str) -> None:
    with pytest.raises(RecallHandleError, match="recall handle is invalid"):
        RecallHandle.decode(handle)


def test_fields_that_cannot_be_encoded_are_refused() -> None:
    with pytest.raises(RecallHandleError):
        RecallHandle("a topic", "b", 1, "ID").encode()
    with pytest.raises(RecallHandleError):
        RecallHandle("T", "b", 1, "").encode()
