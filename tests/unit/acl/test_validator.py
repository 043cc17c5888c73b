"""ACL 1.0 validation: PlainPermissionManager.validate's order and texts (rocketmq-all-4.9.8)."""

from __future__ import annotations

import json

import pytest

from tidemq.acl.plain_config import parse_plain_acl
from tidemq.acl.signing import sign_fields
from tidemq.acl.validator import AclPolicy, Denial, Reason, client_host, validate
from tidemq.protocol.codes import RequestCode
from tidemq.protocol.command import RemotingCommand

POLICY = AclPolicy(
    parse_plain_acl(
        """
globalWhiteRemoteAddresses: [10.10.*.*]
accounts:
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: RocketMQ
    secretKey: "01234567"
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - accessKey: adminWithPerms
    secretKey: adminSecret
    admin: true
    defaultTopicPerm: DENY
    topicPerms: [topicB=PUB]
"""
    )
)
HOST = "127.0.0.1"


def signed(
    code: int,
    fields: dict[str, str],
    body: bytes = b"",
    *,
    key: str = "RocketMQ",
    secret: str = "01234567",
) -> RemotingCommand:
    return RemotingCommand.request(code, sign_fields(fields, body, key, secret), body)


def send(topic: str, **signing: str) -> RemotingCommand:
    return signed(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": topic, "e": "0"}, b"x", **signing)


def pull(topic: str, group: str, **signing: str) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0"}
    return signed(RequestCode.PULL_MESSAGE, fields, **signing)


def reason(denial: Denial | None) -> Reason | None:
    return None if denial is None else denial.reason


def test_an_allowed_send_and_pull_pass() -> None:
    assert validate(POLICY, send("topicB"), HOST) is None
    assert validate(POLICY, pull("topicC", "groupB"), HOST) is None


def test_no_access_key_is_refused_with_javas_text() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "topicB"}, b"x")
    assert validate(POLICY, request, HOST) == Denial(
        Reason.NO_ACCESS_KEY, "No accessKey is configured"
    )


def test_a_request_without_fields_is_refused_unless_the_address_is_white() -> None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert reason(validate(POLICY, request, HOST)) is Reason.NO_ACCESS_KEY
    assert validate(POLICY, request, "10.10.3.4") is None


def test_unknown_key_names_the_key_but_no_secret() -> None:
    denial = validate(POLICY, send("topicB", key="nobody99", secret="s3cr3t-value"), HOST)
    assert denial == Denial(Reason.UNKNOWN_ACCESS_KEY, "No acl config for nobody99")


def test_wrong_secret_fails_the_signature_check() -> None:
    denial = validate(POLICY, send("topicB", secret="wrong-secret"), HOST)
    assert denial == Denial(Reason.BAD_SIGNATURE, "Check signature failed for accessKey=RocketMQ")
    assert "wrong-secret" not in denial.remark and "01234567" not in denial.remark


def test_a_tampered_field_or_body_fails_the_signature_check() -> None:
    request = send("topicB")
    request.ext_fields["b"] = "topicC"
    assert reason(validate(POLICY, request, HOST)) is Reason.BAD_SIGNATURE
    request = send("topicB")
    request.body = b"y"
    assert reason(validate(POLICY, request, HOST)) is Reason.BAD_SIGNATURE


def test_topic_perms_then_default_topic_perm() -> None:
    assert validate(POLICY, send("topicA"), HOST) == Denial(
        Reason.NO_PERMISSION, "No default permission for topic:topicA"
    )
    assert reason(validate(POLICY, send("topicC"), HOST)) is Reason.NO_PERMISSION  # SUB only
    assert validate(POLICY, send("unlisted"), HOST) == Denial(
        Reason.NO_PERMISSION, "No default permission for topic:unlisted"
    )


def test_group_perms_then_default_group_perm() -> None:
    assert validate(POLICY, pull("topicB", "anyGroup"), HOST) is None  # defaultGroupPerm SUB
    assert validate(POLICY, pull("topicB", "groupA"), HOST) == Denial(
        Reason.NO_PERMISSION, "No default permission for group:groupA"
    )


def test_a_send_to_a_retry_topic_needs_sub_on_its_group() -> None:
    assert validate(POLICY, send("%RETRY%groupB"), HOST) is None
    assert validate(POLICY, send("%RETRY%groupA"), HOST) == Denial(
        Reason.NO_PERMISSION, "No default permission for group:groupA"
    )


def test_admin_codes_need_an_admin_account() -> None:
    create = {"topic": "T1", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    denial = validate(POLICY, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create), HOST)
    assert denial == Denial(
        Reason.NOT_ADMIN,
        "Need admin permission for request code=17, but accessKey=RocketMQ is not",
    )
    admin = signed(
        RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T1"}, key="rocketmq2", secret="12345678"
    )
    assert validate(POLICY, admin, HOST) is None


def test_an_admin_without_perm_lists_may_do_anything_one_with_lists_may_not() -> None:
    assert validate(POLICY, send("anything", key="rocketmq2", secret="12345678"), HOST) is None
    allowed = send("topicB", key="adminWithPerms", secret="adminSecret")
    assert validate(POLICY, allowed, HOST) is None
    denial = validate(POLICY, send("other", key="adminWithPerms", secret="adminSecret"), HOST)
    assert reason(denial) is Reason.NO_PERMISSION


def test_the_accounts_white_address_skips_signature_and_perms() -> None:
    request = send("topicZ", key="rocketmq2", secret="not-the-secret")
    assert validate(POLICY, request, "192.168.1.20") is None
    assert reason(validate(POLICY, request, HOST)) is Reason.BAD_SIGNATURE


def test_global_white_addresses_need_no_key_at_all() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "topicA"}, b"x")
    assert validate(POLICY, request, "10.10.0.1") is None
    assert validate(POLICY, request, "::ffff:10.10.0.1") is not None  # the gate normalises
    assert validate(POLICY, request, client_host("::ffff:10.10.0.1")) is None


def test_a_trace_pub_skips_the_permission_check() -> None:
    assert validate(POLICY, send("RMQ_SYS_TRACE_TOPIC"), HOST) is None


def test_a_heartbeat_needs_sub_on_each_group_and_subscribed_topic() -> None:
    def heartbeat(group: str, topic: str) -> RemotingCommand:
        body = {
            "clientID": "c1",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [{"topic": topic, "subString": "*"}],
                    "unitMode": False,
                }
            ],
        }
        return signed(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())

    assert validate(POLICY, heartbeat("groupB", "topicC"), HOST) is None
    assert reason(validate(POLICY, heartbeat("groupB", "topicA"), HOST)) is Reason.NO_PERMISSION
    assert reason(validate(POLICY, heartbeat("groupA", "topicC"), HOST)) is Reason.NO_PERMISSION


@pytest.mark.parametrize(
    ("code", "fields", "body"),
    [
        (RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g"}, b""),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "g", "topic": "t", "queueId": "x", "commitOffset": "1"},
            b"",
        ),
        (RequestCode.HEART_BEAT, {"AccessKey": "RocketMQ"}, b"{not json"),
        (RequestCode.HEART_BEAT, {"AccessKey": "RocketMQ"}, b"[" * 100_000),
    ],
)
def test_a_request_java_cannot_parse_is_refused_whoever_sends_it(
    code: int, fields: dict[str, str], body: bytes
) -> None:
    request = RemotingCommand.request(code, fields, body)
    denial = validate(POLICY, request, "10.10.0.1")
    assert denial is not None and denial.reason is Reason.BAD_REQUEST
    assert denial.remark and len(denial.remark) <= 300


def test_a_huge_access_key_is_cut_in_the_remark() -> None:
    denial = validate(POLICY, send("topicB", key="k" * 100_000, secret="x"), HOST)
    assert denial is not None and denial.reason is Reason.UNKNOWN_ACCESS_KEY
    assert len(denial.remark) < 100


@pytest.mark.parametrize(
    "signature", ["", "!!!not base64!!!", "A" * 1_000_000, "\udcff", "null", "é" * 28]
)
def test_any_bad_signature_is_a_signature_refusal(signature: str) -> None:
    request = send("topicB")
    request.ext_fields["Signature"] = signature
    assert reason(validate(POLICY, request, HOST)) is Reason.BAD_SIGNATURE


def test_client_host_normalises_what_a_listener_reports() -> None:
    assert client_host("::ffff:192.168.1.5") == "192.168.1.5"
    assert client_host("fe80::1%eth0") == "fe80::1"
    assert client_host("127.0.0.1") == "127.0.0.1"
    assert client_host("") == ""


def test_an_offset_reset_is_admin_only_here() -> None:
    reset = {"topic": "topicB", "group": "groupB", "timestamp": "0", "isForce": "true"}
    denial = validate(POLICY, signed(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset), HOST)
    assert reason(denial) is Reason.NOT_ADMIN
    admin = signed(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset, key="rocketmq2", secret="12345678"
    )
    assert validate(POLICY, admin, HOST) is None


def test_require_admin_makes_any_code_admin_only() -> None:
    request = signed(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "topicB"})
    assert validate(POLICY, request, HOST) is None
    assert reason(validate(POLICY, request, HOST, require_admin=True)) is Reason.NOT_ADMIN
