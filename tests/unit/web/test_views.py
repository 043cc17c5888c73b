"""How the API shows bodies and topics, and maps cluster errors to HTTP statuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidemq.protocol.codes import ResponseCode
from tidemq.web.errors import status_of
from tidemq.web.views import HEX_LIMIT, body_view, topic_kind


def test_a_json_body_is_pretty_printed() -> None:
    view = body_view(b'{"id": 7, "items": [1, 2]}')
    assert view["encoding"] == "json"
    assert view["pretty"] == '{\n  "id": 7,\n  "items": [\n    1,\n    2\n  ]\n}'


def test_text_that_only_looks_like_json_stays_text() -> None:
    assert body_view(b"{not json")["encoding"] == "text"
    assert body_view("héllo".encode())["text"] == "héllo"


def test_a_binary_body_is_shown_as_hex_and_cut() -> None:
    view = body_view(b"\xff\x00\x10")
    assert (view["encoding"], view["hex"], view["text"]) == ("binary", "ff 00 10", None)
    big = body_view(b"\xff" * (HEX_LIMIT + 5))
    assert big["hex_cut"] and big["size"] == HEX_LIMIT + 5


@given(st.binary(max_size=300))
def test_every_body_gets_a_view_of_its_size(body: bytes) -> None:
    view = body_view(body)
    assert view["size"] == len(body)
    assert view["encoding"] in ("json", "text", "binary")
    if view["encoding"] == "binary":
        assert bytes.fromhex(view["hex"]) == body
    else:
        assert view["text"].encode() == body


@pytest.mark.parametrize(
    ("topic", "kind"),
    [("Orders", "NORMAL"), ("%RETRY%g", "RETRY"), ("%DLQ%g", "DLQ"), ("TBW102", "SYSTEM"),
     ("rmq_sys_wheel_timer", "SYSTEM"), ("DefaultCluster", "SYSTEM")],
)  # fmt: skip
def test_topic_kinds(topic: str, kind: str) -> None:
    assert topic_kind(topic, {"DefaultCluster"}) == kind


@pytest.mark.parametrize(
    ("code", "status"),
    [(ResponseCode.NO_PERMISSION, 403), (ResponseCode.TOPIC_NOT_EXIST, 404),
     (ResponseCode.MESSAGE_ILLEGAL, 400), (ResponseCode.RPC_TIME_OUT, 504),
     (ResponseCode.RPC_SEND_TO_CHANNEL_FAILED, 502), (ResponseCode.SYSTEM_ERROR, 502)],
)  # fmt: skip
def test_cluster_errors_map_to_statuses(code: int, status: int) -> None:
    assert status_of(code) == status
