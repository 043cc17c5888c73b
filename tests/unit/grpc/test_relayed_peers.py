"""Reading a call's client through the relayed-peer book: grpc's own peer
when nothing is relayed, the client's behind the front, never a stale one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidemq.grpc.acl_interceptor import peer_host
from tidemq.grpc.relayed_peers import RelayedPeers, grpc_peer


def test_grpc_peer_strings_read_back_as_the_host() -> None:
    assert grpc_peer("10.0.0.7", 51234) == "ipv4:10.0.0.7:51234"
    assert peer_host(grpc_peer("10.0.0.7", 51234)) == "10.0.0.7"
    assert peer_host(grpc_peer("::1", 5000)) == "::1"
    assert peer_host(grpc_peer("fe80::1", 5000)) == "fe80::1"


@given(st.ip_addresses(), st.integers(1, 65535))
def test_any_address_round_trips_through_the_peer_string(address: object, port: int) -> None:
    assert peer_host(grpc_peer(str(address), port)) == str(address)


def test_relayed_connections_name_their_client_until_removed() -> None:
    peers = RelayedPeers()
    assert peers.real("ipv4:10.0.0.1:5000") == "ipv4:10.0.0.1:5000"
    peers.add("unix:/tmp/tidemq-grpc-x/c1", "ipv4:10.0.0.7:51234")
    assert peers.real("unix:/tmp/tidemq-grpc-x/c1") == "ipv4:10.0.0.7:51234"
    # grpc may percent-encode the path
    assert peers.real("unix:%2Ftmp%2Ftidemq-grpc-x%2Fc1") == "ipv4:10.0.0.7:51234"
    assert peers.real("unix:/tmp/tidemq-grpc-x/c2") == "unix:/tmp/tidemq-grpc-x/c2"
    assert len(peers) == 1
    peers.remove("unix:/tmp/tidemq-grpc-x/c1")
    # a call still running on a connection already gone is not taken for anyone's
    assert peer_host(peers.real("unix:/tmp/tidemq-grpc-x/c1")) == "unix:/tmp/tidemq-grpc-x/c1"
    assert len(peers) == 0
