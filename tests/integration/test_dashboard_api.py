"""The dashboard's JSON API against a real `tidemq serve --http-port 0`: every
endpoint, its error paths, and the auth hook with access control on."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from dashboard_support import Api, dashboard_server, started_consumer

from tidemq import ConsumeStatus
from tidemq.testing.waiting import wait_until

pytestmark = pytest.mark.slow


def test_topics_messages_and_timers(tmp_path: Path) -> None:
    with dashboard_server(tmp_path) as (_, api):
        assert api.ok("GET", "/api/health") == {"status": "ok", "broker": "broker-a"}
        cluster = api.ok("GET", "/api/cluster")
        (broker,) = cluster["brokers"]
        assert (broker["broker"], broker["role"], broker["error"]) == ("broker-a", "MASTER", None)
        assert broker["version"].startswith("tidemq") and 0 <= broker["disk_ratio"] <= 1
        assert cluster["access_control"] is False

        created = api.call("POST", "/api/topics", {"name": "ApiOrders", "queues": 2})
        assert (created.status, created.body["result"]) == (201, "created")
        again = api.call("POST", "/api/topics", {"name": "ApiOrders", "queues": 2, "perm": 6})
        assert (again.status, again.body["result"]) == (200, "updated")

        sent = api.call(
            "POST",
            "/api/topics/ApiOrders/messages",
            {"body": '{"order": 7}', "tags": "new", "keys": "order-7", "properties": {"a": "b"}},
        )
        assert sent.status == 201 and sent.body["status"] == "SEND_OK"
        msg_id, offset_id = sent.body["msg_id"], sent.body["offset_msg_id"]

        listed = {t["topic"]: t for t in api.ok("GET", "/api/topics")["topics"]}
        row = listed["ApiOrders"]
        assert (row["kind"], row["read_queues"], row["perm"]["text"], row["messages"]) == (
            "NORMAL", 2, "RW-", 1,
        )  # fmt: skip
        assert listed["TBW102"]["kind"] == "SYSTEM"

        detail = api.ok("GET", "/api/topics/ApiOrders")
        assert [q["queue"] for q in detail["queues"]] == [0, 1]
        assert sum(q["max_offset"] - q["min_offset"] for q in detail["queues"]) == 1
        assert detail["route"]["queues"][0]["write_queues"] == 2

        by_key = api.ok("GET", "/api/messages?topic=ApiOrders&key=order-7")
        assert [m["msg_id"] for m in by_key["messages"]] == [msg_id]
        whole = api.ok("GET", f"/api/messages/{offset_id}")
        assert whole["body"]["encoding"] == "json"
        assert whole["body"]["pretty"] == '{\n  "order": 7\n}'
        assert whole["properties"]["a"] == "b" and whole["tags"] == "new"
        by_client_id = api.ok("GET", f"/api/messages/{msg_id}?topic=ApiOrders")
        assert by_client_id["offset_msg_id"] == offset_id
        stored = whole["store_timestamp"]
        ranged = api.ok("GET", f"/api/messages?topic=ApiOrders&begin={stored}&end={stored}")
        assert [m["msg_id"] for m in ranged["messages"]] == [msg_id]
        empty = api.ok("GET", f"/api/messages?topic=ApiOrders&begin=0&end={stored - 1}")
        assert empty["messages"] == []

        updated = api.ok("PUT", "/api/topics/ApiOrders", {"queues": 3})
        assert updated["brokers"][0]["write_queues"] == 3

        timer = api.ok(
            "POST", "/api/topics/ApiOrders/messages", {"body": "later", "keys": "t1"}
        )  # a plain send: timers come from the CLI's --delay below
        assert timer["status"] == "SEND_OK"
        assert api.ok("GET", "/api/transactions")["waiting"] == []

        deleted = api.ok("DELETE", "/api/topics/ApiOrders")
        assert deleted["deleted_from"] == ["broker-a"]
        gone = api.get("/api/topics/ApiOrders")
        assert (gone.status, gone.body["code"]) == (404, "TOPIC_NOT_EXIST")


def test_timers_are_listed_and_recalled(tmp_path: Path) -> None:
    with dashboard_server(tmp_path) as (process, api):
        api.ok("POST", "/api/topics", {"name": "ApiTimers"})
        handles = []
        for delay in (300, 600):
            out = subprocess.run(
                [sys.executable, "-m", "tidemq.cli.main", "send", "ApiTimers", f"in {delay}",
                 "--delay", str(delay), "--namesrv", process.namesrv, "--json"],
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            handles.append(json.loads(out.stdout)[0]["recall_handle"])
        listing = wait_until(
            lambda: (d := api.ok("GET", "/api/timers?bins=6"))["total"] == 2 and d,
            "both timers in the timer files",
        )
        assert sum(count for _, count in listing["histogram"]) == 2
        assert [t["recall_handle"] for t in listing["timers"]] == handles
        recalled = api.ok(
            "POST", "/api/timers/recall", {"topic": "ApiTimers", "handle": handles[0]}
        )
        assert recalled["recalled"] is True
        left = api.ok("GET", "/api/timers")
        assert [t["recall_handle"] for t in left["timers"]] == handles[1:]
        bad = api.call("POST", "/api/timers/recall", {"topic": "ApiTimers", "handle": "nonsense"})
        assert bad.status == 400 and "recall handle is invalid" in bad.body["error"]


def test_groups_lag_reset_and_dead_letters(tmp_path: Path) -> None:
    with dashboard_server(tmp_path) as (process, api):
        api.ok("POST", "/api/topics", {"name": "ApiPay", "queues": 1})
        for i in range(3):
            api.ok("POST", "/api/topics/ApiPay/messages", {"body": f"pay {i}", "keys": f"p{i}"})
        bodies: list[bytes] = []
        resent = threading.Event()

        def fail_pay_1(messages, context):  # type: ignore[no-untyped-def]
            for message in messages:
                bodies.append(message.body)
                if message.body == b"pay 1" and not resent.is_set():
                    return ConsumeStatus.RECONSUME_LATER  # twice: then it is a dead letter
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = started_consumer(process.namesrv, "ApiPayers", "ApiPay", fail_pay_1)
        try:
            group = wait_until(
                lambda: (
                    (g := api.ok("GET", "/api/groups/ApiPayers"))["dlq"]["messages"] == 1
                    and g["total_lag"] == 0
                    and g
                ),
                "pay 1 in the dead-letter topic and the lag at zero",
            )
            (member,) = group["connections"]
            assert member["address"].startswith("127.0.0.1:") and member["version"] > 0
            subscribed = {s["topic"]: s["expression"] for s in group["subscriptions"]}
            assert subscribed == {"ApiPay": "*", "%RETRY%ApiPayers": "*"}
            listed = {g["group"]: g for g in api.ok("GET", "/api/groups")["groups"]}
            assert listed["ApiPayers"]["lag"] == 0 and not listed["ApiPayers"]["system"]
            assert listed["TOOLS_CONSUMER"]["system"]

            (letter,) = api.ok("GET", "/api/groups/ApiPayers/dlq")["messages"]
            assert letter["preview"] == "pay 1" and letter["origin_topic"] == "ApiPay"
            resent.set()
            again = api.post(f"/api/groups/ApiPayers/dlq/{quote(letter['msg_id'])}/resend")
            assert again.status == 201 and again.body["topic"] == "%RETRY%ApiPayers"
            wait_until(lambda: bodies.count(b"pay 1") == 3, "the resent pay 1 consumed again")
            history = wait_until(
                lambda: (h := api.ok("GET", "/api/groups/ApiPayers/history"))["lag"] and h,
                "a lag sample of ApiPayers",
            )
            assert all(lag >= 0 for _, lag in history["lag"])
        finally:
            consumer.shutdown()

        reset = api.ok("POST", "/api/groups/ApiPayers/reset", {"topic": "ApiPay", "to": "earliest"})
        assert reset["offsets"] == [{"broker": "broker-a", "queue": 0, "offset": 0}]
        assert api.ok("GET", "/api/groups/ApiPayers")["total_lag"] == 3
        api.ok("POST", "/api/groups/ApiPayers/reset", {"topic": "ApiPay", "offset": 2})
        assert api.ok("GET", "/api/groups/ApiPayers")["total_lag"] == 1
        later = int(time.time() * 1000) + 60_000
        api.ok("POST", "/api/groups/ApiPayers/reset", {"topic": "ApiPay", "timestamp": later})
        assert api.ok("GET", "/api/groups/ApiPayers")["total_lag"] == 0

        for body, message in (
            ({"topic": "ApiPay"}, "give one of"),
            ({"topic": "ApiPay", "to": "latest", "offset": 1}, "give only one of"),
            ({"topic": "ApiPay", "to": "middle"}, "earliest or latest"),
            ({"to": "latest"}, "topic is required"),
        ):
            refused = api.call("POST", "/api/groups/ApiPayers/reset", body)
            assert refused.status == 400 and message in refused.body["error"], refused.body
        unknown = api.get("/api/groups/NoSuchGroup")
        assert unknown.status == 404


def test_error_answers_are_json_with_the_right_status(tmp_path: Path) -> None:
    with dashboard_server(tmp_path) as (_, api):
        cases = [
            (api.call("POST", "/api/topics", raw=b"{not json"), 400, "not JSON"),
            (api.call("POST", "/api/topics", {}), 400, "name is required"),
            (api.call("POST", "/api/topics", {"name": "X", "queues": 0}), 400, "out of range"),
            (api.call("POST", "/api/topics", {"name": "X", "type": "odd"}), 400, "type must"),
            (api.call("POST", "/api/topics", {"name": "bad name!"}), 400, "illegal"),
            (api.call("PUT", "/api/topics/Nope", {}), 400, "at least one"),
            (api.call("PUT", "/api/topics/Nope", {"queues": 2}), 404, "does not exist"),
            (api.call("DELETE", "/api/topics/Nope"), 404, "does not exist"),
            (api.post("/api/topics/%25DLQ%25g/messages", {"body": "x"}), 400, "dead-letter"),
            (api.post("/api/topics/Any/messages", {}), 400, "body is required"),
            (api.get("/api/messages"), 400, "topic is required"),
            (api.get("/api/messages?topic=T"), 400, "give key"),
            (api.get("/api/messages?topic=T&key=k&begin=1"), 400, "not both"),
            (api.get("/api/messages?topic=T&begin=yesterday"), 400, "ISO-8601"),
            (api.get("/api/messages/ABCDEF"), 400, "?topic="),
            (api.get("/api/groups/G/dlq?max=0"), 400, "out of range"),
            (api.get("/api/nothing/here"), 404, "no API"),
            (api.call("PATCH", "/api/topics"), 405, "PATCH is not allowed"),
        ]
        for answer, status, text in cases:
            assert answer.status == status, answer.body
            assert isinstance(answer.body, dict) and text in answer.body["error"], answer.body
        assert api.ok("GET", "/api/health")["status"] == "ok"  # still up


ADMIN = ("dashAdmin01", "dashAdminSecret01")
READER = ("dashReader1", "dashReaderSecret1")
ACL = f"""\
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {READER[0]}
    secretKey: {READER[1]}
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


def test_the_auth_hook_with_access_control_on(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    with dashboard_server(tmp_path, "--acl", str(acl)) as (_, anonymous):
        admin, reader = anonymous.as_user(*ADMIN), reader_api(anonymous)
        assert anonymous.ok("GET", "/api/health")["status"] == "ok"
        page = anonymous.call("GET", "/")
        assert page.status == 200  # the page itself holds no data; it asks for credentials

        for answer in (
            anonymous.get("/api/cluster"),
            anonymous.get("/api/timers"),
            anonymous.as_user(ADMIN[0], "wrong").get("/api/topics"),
            anonymous.as_user("nobody", "x").post("/api/topics", {"name": "T"}),
        ):
            assert answer.status == 401, answer.body
            assert answer.headers["WWW-Authenticate"].startswith("Basic")

        assert admin.ok("GET", "/api/cluster")["access_control"] is True
        created = admin.call("POST", "/api/topics", {"name": "AclDash"})
        assert created.status == 201, created.body
        admin.ok("POST", "/api/topics/AclDash/messages", {"body": "x", "keys": "k"})

        assert reader.ok("GET", "/api/timers")["total"] == 0
        found = reader.ok("GET", "/api/messages?topic=AclDash&key=k")
        assert len(found["messages"]) == 1
        for answer in (
            reader.post("/api/topics", {"name": "Mine"}),
            reader.call("DELETE", "/api/topics/AclDash"),
            reader.post("/api/topics/AclDash/messages", {"body": "x"}),
            reader.post("/api/groups/G/reset", {"topic": "AclDash", "to": "latest"}),
            reader.post("/api/timers/recall", {"topic": "AclDash", "handle": "h"}),
        ):
            assert answer.status == 403 and answer.body["code"] == "NOT_ADMIN", answer.body
        assert admin.ok("DELETE", "/api/topics/AclDash")["deleted_from"] == ["broker-a"]


def reader_api(api: Api) -> Api:
    return api.as_user(*READER)


def test_the_page_and_its_files_are_served_with_types_and_caching(tmp_path: Path) -> None:
    with dashboard_server(tmp_path) as (_, api):
        expected = {
            "/": ("text/html", "no-cache"),
            "/static/js/main.js": ("text/javascript", "no-cache"),
            "/static/app.css": ("text/css", "no-cache"),
            "/static/favicon.svg": ("image/svg+xml", "no-cache"),
            "/static/vendor/preact/dist/preact.mjs": ("text/javascript", "max-age=86400"),
            "/static/vendor/uplot/dist/uPlot.min.css": ("text/css", "max-age=86400"),
            "/static/vendor/uplot/LICENSE": ("text/plain", "max-age=86400"),
        }
        for path, (content_type, cache) in expected.items():
            answer = api.get(path)
            assert answer.status == 200, path
            assert answer.headers["Content-Type"].startswith(content_type), (path, answer.headers)
            assert cache in answer.headers["Cache-Control"], (path, answer.headers)
            assert answer.headers["X-Content-Type-Options"] == "nosniff"
            assert "ETag" in answer.headers or "Last-Modified" in answer.headers
        assert "importmap" in api.get("/").body
        for path in ("/static/nothing.js", "/static/../app.py", "/static/%2e%2e/app.py"):
            assert api.get(path).status == 404, path
