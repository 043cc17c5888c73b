"""The 5.x users and ACLs in the store and at the gate: durable changes, their rules,
and how they combine with plain_acl.yml on both protocols (a key the file names is the
file's; any other is a user's)."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tidemq.acl.auth_model import AuthModelError, PolicyEntry, User, UserStatus, UserType
from tidemq.acl.auth_store import AclNotFound, AuthStore, UserNotFound
from tidemq.acl.gate import AclGate
from tidemq.acl.grpc_auth import client_headers
from tidemq.acl.grpc_validator import GrpcCaller
from tidemq.acl.permissions import Permission
from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.signing import sign_fields
from tidemq.acl.validator import AclPolicy, Reason
from tidemq.common.clock import ManualClock
from tidemq.protocol.codes import RequestCode, ResponseCode
from tidemq.protocol.command import RemotingCommand

HOST = "127.0.0.1"
FILE = AclPolicy(
    parse_plain_acl(
        """
accounts:
  - accessKey: fileKey001
    secretKey: fileSecret01
    defaultTopicPerm: PUB
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
"""
    )
)


def entry(resource: str, *actions: str, decision: str = "Allow") -> PolicyEntry:
    return PolicyEntry.build(resource, actions, decision)


@pytest.fixture
def store(tmp_path: Path) -> AuthStore:
    store = AuthStore(tmp_path / "auth.json")
    store.create_user(User("root", "rootSecret1", UserType.SUPER))
    store.create_user(User("alice", "aliceSecret1"))
    store.create_acl("alice", [entry("Topic:*", "Pub", "Sub"), entry("Group:g*", "Sub")])
    store.create_acl("User:alice", [entry("Topic:secret", "Pub", decision="Deny")])
    return store


def send(topic: str, key: str, secret: str) -> RemotingCommand:
    fields = sign_fields({"a": "PG", "b": topic, "e": "0"}, b"x", key, secret)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"x")


def admin_request(code: int, key: str, secret: str) -> RemotingCommand:
    return RemotingCommand.request(code, sign_fields({"username": "x"}, b"", key, secret))


def test_changes_are_durable_and_the_file_is_private(store: AuthStore) -> None:
    again = AuthStore(store.path)
    assert again.state == store.state
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [e.resource.key for e in again.get_acl("alice").entries] == [
        "Topic:*",
        "Group:g*",
        "Topic:secret",
    ]


def test_store_rules(store: AuthStore) -> None:
    with pytest.raises(AuthModelError, match="already exists"):
        store.create_user(User("alice", "other123"))
    with pytest.raises(UserNotFound):
        store.update_user("bob", password="x1234567")
    with pytest.raises(UserNotFound, match="create user bob first"):
        store.create_acl("bob", [entry("Topic:a", "Pub")])
    with pytest.raises(AclNotFound):
        store.delete_acl("root")
    with pytest.raises(UserNotFound):
        store.delete_acl("bob")
    store.update_acl("root", [entry("Topic:a", "Pub")])  # RocketMQ: made when missing
    assert [e.resource.key for e in store.get_acl("root").entries] == ["Topic:a"]
    assert store.delete_user("bob") is False  # nothing to delete: no error, as in RocketMQ
    with pytest.raises(AuthModelError, match="last enabled Super user"):
        store.update_user("root", status=UserStatus.DISABLE)
    with pytest.raises(AuthModelError, match="last enabled Super user"):
        store.delete_user("root")
    store.delete_acl("alice", ["Topic:secret"])
    assert "Topic:secret" not in json.dumps(store.get_acl("alice").to_json())
    assert store.delete_user("alice") is True  # its ACL goes with it
    store.delete_acl("root")
    assert store.list_acls() == [] and [u.username for u in store.list_users()] == ["root"]


def test_a_bad_file_is_refused_not_emptied(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text('{"users": [{"username": "a"}]}')
    with pytest.raises(AuthModelError, match="password is empty"):
        AuthStore(path)


def gate_over(store: AuthStore, policy: AclPolicy = FILE) -> AclGate:
    gate = AclGate(policy.with_auth(store.state))
    store.on_change = gate.use_auth
    return gate


def test_remoting_users_are_judged_by_their_acls(store: AuthStore) -> None:
    gate = gate_over(store)
    assert gate.check(send("orders", "alice", "aliceSecret1"), HOST) is None
    refusal = gate.check(send("secret", "alice", "aliceSecret1"), HOST)
    assert refusal is not None and refusal.code == ResponseCode.NO_PERMISSION
    assert refusal.remark == (
        "User:alice has no permission to access Topic:secret from 127.0.0.1, the decision is deny."
    )
    wrong = gate.check(send("orders", "alice", "wrong123"), HOST)
    assert wrong is not None and wrong.remark == "Check signature failed for accessKey=alice"
    # a change applies to the next request
    store.delete_acl("alice", ["Topic:secret"])
    assert gate.check(send("secret", "alice", "aliceSecret1"), HOST) is None
    store.update_user("alice", status=UserStatus.DISABLE)
    disabled = gate.check(send("orders", "alice", "aliceSecret1"), HOST)
    assert disabled is not None and disabled.remark == "User:alice is disabled."
    assert gate.refusals()[Reason.USER_DISABLED.value] == 1


def test_admin_requests_need_a_super_user_or_a_cluster_grant(store: AuthStore) -> None:
    gate = gate_over(store)
    create = int(RequestCode.AUTH_CREATE_USER)
    assert gate.check(admin_request(create, "root", "rootSecret1"), HOST) is None
    assert gate.check(admin_request(create, "adminKey01", "adminSecret01"), HOST) is None
    refusal = gate.check(admin_request(create, "alice", "aliceSecret1"), HOST)
    assert refusal is not None and "Cluster:*" in refusal.remark
    assert gate.check(admin_request(create, "fileKey001", "fileSecret01"), HOST) is not None
    store.create_acl("alice", [entry("Cluster", "Update")])
    assert gate.check(admin_request(create, "alice", "aliceSecret1"), HOST) is None
    listing = admin_request(int(RequestCode.AUTH_LIST_USER), "alice", "aliceSecret1")
    assert gate.check(listing, HOST) is not None  # a list is Get, which Update is not
    store.create_acl("alice", [entry("Cluster", "Get")])  # replaces the Cluster entry
    for code in (RequestCode.AUTH_LIST_USER, RequestCode.AUTH_LIST_ACL, RequestCode.AUTH_GET_ACL):
        assert gate.check(admin_request(int(code), "alice", "aliceSecret1"), HOST) is None
    assert gate.check(admin_request(create, "alice", "aliceSecret1"), HOST) is not None


def test_who_is_a_super_user(store: AuthStore) -> None:
    """A Super user or a file admin account (RocketMQ's migration makes those Super)."""
    gate = gate_over(store)
    assert gate.is_super("root") and gate.is_super("adminKey01")
    assert not gate.is_super("alice") and not gate.is_super("fileKey001")
    assert not gate.is_super("nobody")
    store.create_user(User("root2", "rootSecret2", UserType.SUPER))
    store.update_user("root", status=UserStatus.DISABLE)
    assert not gate.is_super("root") and gate.is_super("root2")


def test_a_key_in_the_file_is_judged_by_the_file_only(store: AuthStore) -> None:
    """A user with the same name as a file account does not change what the key may do."""
    store.create_user(User("fileKey001", "userSecret1"))
    store.create_acl("fileKey001", [entry("*", "All", decision="Deny")])
    gate = gate_over(store)
    assert gate.check(send("orders", "fileKey001", "fileSecret01"), HOST) is None
    refusal = gate.check(send("orders", "fileKey001", "userSecret1"), HOST)
    assert refusal is not None and refusal.remark.startswith("Check signature failed")


def test_the_file_reloaded_keeps_the_users(store: AuthStore) -> None:
    gate = gate_over(store)
    gate.use(AclPolicy(parse_plain_acl("accounts: []")))
    assert gate.check(send("orders", "alice", "aliceSecret1"), HOST) is None


def test_grpc_users_authenticate_and_are_authorized_per_request(store: AuthStore) -> None:
    gate = gate_over(store)
    clock = ManualClock()
    at = datetime.fromtimestamp(clock.now_ms() / 1000, UTC)
    headers = client_headers("alice", "aliceSecret1", at)
    caller = gate.grpc_authenticate("SendMessage", headers, HOST, clock.now_ms(), 900_000)
    assert caller == GrpcCaller(HOST, "alice")
    assert isinstance(caller, GrpcCaller)
    assert gate.grpc_authorize("SendMessage", caller, lambda: [("orders", Permission.PUB)]) is None
    denial = gate.grpc_authorize("SendMessage", caller, lambda: [("secret", Permission.PUB)])
    assert denial is not None and denial.reason is Reason.NO_PERMISSION
    retry = [("%RETRY%other", Permission.SUB)]
    denial = gate.grpc_authorize("ReceiveMessage", caller, lambda: retry)
    assert denial is not None and "Group:other" in denial.remark
    store.update_user("alice", status=UserStatus.DISABLE)  # an open stream's next request
    denial = gate.grpc_authorize("SendMessage", caller, lambda: [("orders", Permission.PUB)])
    assert denial is not None and denial.reason is Reason.USER_DISABLED
    bad = client_headers("alice", "nope1234", at)
    refused = gate.grpc_authenticate("SendMessage", bad, HOST, clock.now_ms(), 900_000)
    assert not isinstance(refused, GrpcCaller) and refused.reason is Reason.USER_DISABLED


def test_topic_admin_is_granted_on_the_topic(store: AuthStore) -> None:
    """Topic creation and deletion need Create / Delete on Topic:T, as RocketMQ 5's
    CreateTopicRequestHeader says; other admin requests an action on Cluster."""
    gate = gate_over(store)
    store.create_acl("alice", [entry("Topic:team-*", "Create", "Delete")])

    def topic_admin(code: RequestCode, topic: str) -> RemotingCommand:
        fields = sign_fields({"topic": topic}, b"", "alice", "aliceSecret1")
        return RemotingCommand.request(int(code), fields)

    for code in (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER):
        assert gate.check(topic_admin(code, "team-a"), HOST) is None
        refusal = gate.check(topic_admin(code, "billing"), HOST)
        assert refusal is not None and "Topic:billing" in refusal.remark
    config = gate.check(
        admin_request(int(RequestCode.UPDATE_BROKER_CONFIG), "alice", "aliceSecret1"), HOST
    )
    assert config is not None and "Cluster:*" in config.remark


def signed(code: int, fields: dict[str, str], key: str, secret: str) -> RemotingCommand:
    return RemotingCommand.request(code, sign_fields(fields, b"", key, secret))


def test_offsets_and_queries_need_what_rocketmq_5_asks_of_a_user(store: AuthStore) -> None:
    """DefaultAuthorizationContextBuilder.build: reading an offset takes Sub or
    Get, writing one Sub or Update, on the topic (not a retry topic) and the
    group; the consumer list Sub or Get on the group; a message query Sub or
    Get on the topic; END_TRANSACTION Pub on the topic it names."""
    store.create_user(User("bob", "bobSecret01"))
    store.create_acl("bob", [entry("Topic:orders", "Get"), entry("Group:audit", "Get")])
    store.create_user(User("carol", "carolSecret1"))
    gate = gate_over(store)
    offset = {"consumerGroup": "audit", "topic": "orders", "queueId": "0"}
    update = {**offset, "commitOffset": "5"}

    def check(code: int, fields: dict[str, str], key: str, secret: str) -> str | None:
        refusal = gate.check(signed(code, fields, key, secret), HOST)
        if refusal is None:
            return None
        assert refusal.code == ResponseCode.NO_PERMISSION
        return refusal.remark

    query = RequestCode.QUERY_CONSUMER_OFFSET
    assert check(query, offset, "bob", "bobSecret01") is None  # Get is enough to read
    assert check(RequestCode.UPDATE_CONSUMER_OFFSET, update, "bob", "bobSecret01") == (
        "User:bob has no permission to access Topic:orders from 127.0.0.1, no matched policies."
    )
    assert check(query, offset, "carol", "carolSecret1") == (
        "User:carol has no permission to access Topic:orders from 127.0.0.1, no matched policies."
    )
    # alice (Topic:* Pub Sub, Group:g* Sub): Sub reads and writes offsets of her groups
    mine = {**update, "consumerGroup": "g1"}
    assert check(RequestCode.UPDATE_CONSUMER_OFFSET, mine, "alice", "aliceSecret1") is None
    assert check(query, {**offset, "consumerGroup": "audit"}, "alice", "aliceSecret1") == (
        "User:alice has no permission to access Group:audit from 127.0.0.1, no matched policies."
    )
    retry = {**offset, "topic": "%RETRY%audit"}  # a retry topic: the group alone is checked
    assert check(query, retry, "bob", "bobSecret01") is None
    group_list = RequestCode.GET_CONSUMER_LIST_BY_GROUP
    assert check(group_list, {"consumerGroup": "audit"}, "bob", "bobSecret01") is None
    assert check(group_list, {"consumerGroup": "audit"}, "carol", "carolSecret1") is not None
    assert check(RequestCode.QUERY_MESSAGE, {"topic": "orders"}, "bob", "bobSecret01") is None
    ended = {"producerGroup": "PG", "topic": "orders", "commitOrRollback": "8"}
    assert check(RequestCode.END_TRANSACTION, ended, "bob", "bobSecret01") == (
        "User:bob has no permission to access Topic:orders from 127.0.0.1, no matched policies."
    )
    assert check(RequestCode.END_TRANSACTION, ended, "alice", "aliceSecret1") is None
    untargeted = {"producerGroup": "PG", "commitOrRollback": "8"}
    assert check(RequestCode.END_TRANSACTION, untargeted, "carol", "carolSecret1") is None


def test_pop_and_the_lookups_need_their_headers_actions(store: AuthStore) -> None:
    """buildContextByAnnotation: POP and its acknowledgements are Sub on the
    group and the topic; the offset and message lookups Get on the topic; a
    retry topic in a topic field stands for its group."""
    store.create_user(User("dave", "daveSecret01"))
    store.create_acl("dave", [entry("Topic:orders", "Sub"), entry("Group:pop", "Sub")])
    gate = gate_over(store)

    def refused(code: int, fields: dict[str, str]) -> str | None:
        refusal = gate.check(signed(code, fields, "dave", "daveSecret01"), HOST)
        return None if refusal is None else refusal.remark

    popped = {"consumerGroup": "pop", "topic": "orders", "queueId": "-1"}
    assert refused(RequestCode.POP_MESSAGE, popped) is None
    assert refused(RequestCode.ACK_MESSAGE, popped) is None
    assert refused(RequestCode.POP_MESSAGE, {**popped, "consumerGroup": "other"}) == (
        "User:dave has no permission to access Group:other from 127.0.0.1, no matched policies."
    )
    assert (
        refused(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {**popped, "topic": "%RETRY%pop"}) is None
    )
    assert refused(RequestCode.GET_MAX_OFFSET, {"topic": "orders", "queueId": "0"}) == (
        "User:dave has no permission to access Topic:orders from 127.0.0.1, no matched policies."
    )
    store.create_acl("dave", [entry("Topic:orders", "Get")])
    assert refused(RequestCode.GET_MAX_OFFSET, {"topic": "orders", "queueId": "0"}) is None


def test_queue_locks_need_sub_on_the_group_and_each_topic(store: AuthStore) -> None:
    """LOCK/UNLOCK_BATCH_MQ: Sub on the body's group and every queue's topic
    (not a retry topic); a body that is not a lock body is refused."""
    store.create_user(User("erin", "erinSecret01"))
    store.create_acl("erin", [entry("Topic:orders", "Sub"), entry("Group:g1", "Sub")])
    gate = gate_over(store)

    def lock(
        code: int, body: object, key: str = "erin", secret: str = "erinSecret01"
    ) -> str | None:
        raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
        fields = sign_fields({}, raw, key, secret)
        refusal = gate.check(RemotingCommand.request(code, fields, raw), HOST)
        return None if refusal is None else refusal.remark

    queues = [
        {"topic": "orders", "brokerName": "broker-a", "queueId": 0},
        {"topic": "%RETRY%g1", "brokerName": "broker-a", "queueId": 0},
    ]
    mine = {"consumerGroup": "g1", "clientId": "c1", "mqSet": queues}
    assert lock(RequestCode.LOCK_BATCH_MQ, mine) is None
    assert lock(RequestCode.UNLOCK_BATCH_MQ, mine) is None
    theirs = {**mine, "consumerGroup": "billing"}
    assert lock(RequestCode.LOCK_BATCH_MQ, theirs) == (
        "User:erin has no permission to access Group:billing from 127.0.0.1, no matched policies."
    )
    secret_queue = {**mine, "mqSet": [{"topic": "secret", "brokerName": "b", "queueId": 1}]}
    assert lock(RequestCode.LOCK_BATCH_MQ, secret_queue) == (
        "User:erin has no permission to access Topic:secret from 127.0.0.1, no matched policies."
    )
    assert lock(RequestCode.LOCK_BATCH_MQ, b"not json") is not None
    assert lock(RequestCode.LOCK_BATCH_MQ, {"mqSet": queues}) is not None
