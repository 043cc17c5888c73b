"""The dashboard in a real browser: headless Debian chromium (Playwright) against
a real `tidemq serve --http-port 0`, real Python consumers behind it.

What a person does on each page, in order: look at the cluster, create a
topic and send a message, find it by key and open it, watch a group's lag
fall to zero while it consumes, resend a dead letter, reset an offset, recall
a timer. Every wait is on a condition (Playwright's expect / wait_for with a
deadline, or a poll of our own with one). A screenshot of each page goes to
test-artefacts/dashboard/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dashboard_support import Api, dashboard_server, started_consumer

from tidemq import ConsumeFromWhere, ConsumeStatus, Producer, PushConsumer, make_message
from tidemq.testing.processes import ServerProcess

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARTEFACTS = Path(__file__).resolve().parents[2] / "test-artefacts" / "dashboard"
UI_WAIT_MS = 60_000
POLL_MS = 50

if not CHROMIUM.exists():
    pytest.skip(
        f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

expect.set_options(timeout=UI_WAIT_MS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Api]]:
    with dashboard_server(tmp_path_factory.mktemp("dashboard")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser, server: tuple[ServerProcess, Api]) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.set_default_timeout(UI_WAIT_MS)
    failures: list[str] = []
    tab.on("pageerror", lambda error: failures.append(str(error)))
    tab.on("dialog", lambda dialog: dialog.accept())
    yield tab
    context.close()
    assert failures == [], f"errors in the page: {failures}"


def until(page: Page, check: Callable[[], object], what: str) -> None:
    """Poll `check` until it holds, for up to UI_WAIT_MS (wait_until's twin for a test
    that drives sync Playwright, whose event loop runs in this thread)."""
    deadline = time.monotonic() + UI_WAIT_MS / 1000
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        page.wait_for_timeout(POLL_MS)


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTEFACTS / f"{name}.png"), full_page=True)


def go(page: Page, server: tuple[ServerProcess, Api], route: str) -> None:
    page.goto(f"{server[1].base}/#/{route}")


def test_the_cluster_page_shows_the_broker_live(
    page: Page, server: tuple[ServerProcess, Api]
) -> None:
    go(page, server, "cluster")
    row = page.get_by_role("table", name="Brokers").locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("broker-a")
    expect(row).to_contain_text("MASTER")
    expect(page.locator(".live")).to_contain_text("live, updated")
    shoot(page, "cluster")


def test_create_a_topic_and_send_a_message(page: Page, server: tuple[ServerProcess, Api]) -> None:
    go(page, server, "topics")
    page.get_by_text("Create a topic").click()
    form = page.get_by_role("form", name="Create a topic")
    form.get_by_label("Name").fill("WebOrders")
    form.get_by_label("Queues").fill("2")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_contain_text("Topic WebOrders created")
    row = page.locator("tbody tr[data-key='WebOrders']")
    expect(row).to_contain_text("2/2")
    shoot(page, "topics")

    row.focus()  # the keyboard opens a row
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Topic WebOrders")).to_be_visible()
    send = page.get_by_role("region", name="Send a test message")
    send.get_by_label("Body").fill('{"order": 42, "items": ["tea"]}')
    send.get_by_label("Keys (space-separated)").fill("order-42")
    send.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status")).to_contain_text("Sent to broker-a")
    expect(page.get_by_role("table", name="Queue offsets")).to_contain_text("broker-a")
    expect(page.locator(".card", has_text="Messages")).to_contain_text("1")
    shoot(page, "topic")


def test_find_the_message_by_key_and_open_it(page: Page, server: tuple[ServerProcess, Api]) -> None:
    go(page, server, "messages")
    search = page.get_by_role("form", name="Search messages")
    search.get_by_role("textbox", name="Topic").fill("WebOrders")
    search.get_by_role("textbox", name="Key").fill("order-42")
    search.get_by_role("button", name="Search").click()
    found = page.get_by_role("table", name="Messages found").locator("tbody tr")
    expect(found).to_have_count(1)
    expect(found).to_contain_text('{"order": 42, "items": ["tea"]}')
    shoot(page, "messages")

    found.get_by_role("link").click()
    expect(page.get_by_test_id("message-body")).to_have_text(
        '{\n  "order": 42,\n  "items": [\n    "tea"\n  ]\n}'
    )
    expect(page.get_by_role("table", name="Properties")).to_contain_text("order-42")
    expect(page.get_by_test_id("no-trace")).to_contain_text("No trace for this message")
    page.get_by_role("tab", name="Text").click()
    expect(page.get_by_test_id("message-body")).to_have_text('{"order": 42, "items": ["tea"]}')
    shoot(page, "message")


def test_a_group_lag_falls_to_zero_after_consuming(
    page: Page, server: tuple[ServerProcess, Api]
) -> None:
    process, api = server
    api.ok("POST", "/api/topics", {"name": "WebCart", "queues": 1})
    api.ok("POST", "/api/topics/WebCart/messages", {"body": "warm up"})
    release = threading.Event()
    consumed: list[bytes] = []

    def hold_then_consume(messages, context):  # type: ignore[no-untyped-def]
        if messages[0].body != b"warm up":  # the group commits an offset first, then waits
            release.wait(UI_WAIT_MS / 1000)
        consumed.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    shoppers = started_consumer(process.namesrv, "WebShoppers", "WebCart", hold_then_consume)
    try:
        until(page, lambda: consumed == [b"warm up"], "the warm-up message consumed")
        go(page, server, "groups/WebShoppers")
        expect(page.get_by_test_id("total-lag")).to_have_text("0")
        for i in range(5):
            api.ok("POST", "/api/topics/WebCart/messages", {"body": f"item {i}"})
        expect(page.get_by_test_id("total-lag")).to_have_text("5")
        expect(page.get_by_role("table", name="Members").locator("tbody tr")).to_have_count(1)
        release.set()
        expect(page.get_by_test_id("total-lag")).to_have_text("0")
        until(page, lambda: len(consumed) == 6, "the five items consumed")
        chart = page.get_by_role("img", name="lag of WebShoppers over time")
        expect(chart).to_have_attribute("data-last", "0")  # the sampler saw it drop
        shoot(page, "group")
    finally:
        release.set()
        shoppers.shutdown()
    go(page, server, "groups")
    expect(page.locator("tbody tr[data-key='WebShoppers']")).to_contain_text("0")
    shoot(page, "groups")


def test_reset_an_offset(page: Page, server: tuple[ServerProcess, Api]) -> None:
    go(page, server, "groups/WebShoppers")
    expect(page.get_by_test_id("total-lag")).to_have_text("0")
    reset = page.get_by_role("region", name="Reset offsets")
    reset.get_by_label("Topic").select_option("WebCart")
    reset.get_by_label("Move to").select_option("earliest")
    reset.get_by_role("button", name="Reset offset").click()  # the confirm is accepted
    expect(page.get_by_role("status")).to_contain_text("reset to earliest")
    expect(page.get_by_test_id("total-lag")).to_have_text("6")
    reset.get_by_label("Move to").select_option("offset")
    reset.get_by_role("spinbutton", name="Offset").fill("4")
    reset.get_by_role("button", name="Reset offset").click()
    expect(page.get_by_test_id("total-lag")).to_have_text("2")


def test_resend_a_dead_letter(page: Page, server: tuple[ServerProcess, Api]) -> None:
    process, api = server
    api.ok("POST", "/api/topics", {"name": "WebPay", "queues": 1})
    api.ok("POST", "/api/topics/WebPay/messages", {"body": "charge card 9", "keys": "pay-9"})
    resent = threading.Event()
    bodies: list[bytes] = []

    def fail_until_resent(messages, context):  # type: ignore[no-untyped-def]
        bodies.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS if resent.is_set() else ConsumeStatus.RECONSUME_LATER

    payers = started_consumer(process.namesrv, "WebPayers", "WebPay", fail_until_resent)
    try:
        go(page, server, "groups/WebPayers")
        expect(page.get_by_test_id("dlq-count")).to_have_text("1")
        letters = page.get_by_role("table", name="Dead letters").locator("tbody tr")
        expect(letters).to_have_count(1)
        expect(letters).to_contain_text("charge card 9")
        shoot(page, "group-dead-letter")
        attempts = len(bodies)
        resent.set()
        letters.get_by_role("button", name="Resend").click()
        expect(page.get_by_role("status")).to_contain_text("given back to WebPayers")
        until(page, lambda: len(bodies) > attempts, "the resent message delivered again")
        assert bodies[-1] == b"charge card 9"
    finally:
        payers.shutdown()


def test_timers_by_due_time_and_recall(page: Page, server: tuple[ServerProcess, Api]) -> None:
    process, api = server
    api.ok("POST", "/api/topics", {"name": "WebLater"})
    for delay in ("600", "1800", "3600"):
        subprocess.run(
            [sys.executable, "-m", "tidemq.cli.main", "send", "WebLater", f"in {delay} s",
             "--delay", delay, "--namesrv", process.namesrv, "--json"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    go(page, server, "timers")
    expect(page.get_by_test_id("timer-total")).to_have_text("3")
    expect(page.get_by_role("img", name="timer messages by due time")).to_be_visible()
    expect(page.get_by_role("table", name="Half messages waiting").or_(
        page.get_by_text("No transaction is waiting for its producer.")
    )).to_be_visible()  # fmt: skip
    shoot(page, "timers")
    earliest = page.get_by_role("table", name="Earliest timers").locator("tbody tr").first
    expect(earliest).to_contain_text("WebLater")
    earliest.get_by_role("button", name="Recall").click()
    expect(page.get_by_role("status")).to_contain_text("Recalled")
    expect(page.get_by_test_id("timer-total")).to_have_text("2")
    left = json.dumps(api.ok("GET", "/api/timers")["timers"])
    assert "in 600 s" not in left and left.count("WebLater") == 2


def test_a_retried_message_shows_its_trace(page: Page, server: tuple[ServerProcess, Api]) -> None:
    process, api = server
    api.ok("POST", "/api/topics", {"name": "WebTraced", "queues": 1})
    deliveries: list[int] = []

    def fail_first(messages, context):  # type: ignore[no-untyped-def]
        deliveries.extend(m.reconsume_times for m in messages)
        first = messages[0].reconsume_times == 0
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS

    tracers = PushConsumer(
        "WebTracers",
        namesrv=process.namesrv,
        listener=fail_first,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_trace=True,
    )
    tracers.subscribe("WebTraced")
    tracers.start()
    try:
        with Producer("WebTraceSenders", namesrv=process.namesrv, enable_trace=True) as producer:
            sent = producer.send(make_message("WebTraced", "trace me", keys="traced-1"))
        until(page, lambda: deliveries == [0, 1], "a failed and a retried delivery")
    finally:
        tracers.shutdown()  # its last trace records go out now
    trace_path = f"/api/messages/{sent.msg_id}/trace"
    until(page, lambda: _consume_events(api, trace_path) == 2, "both deliveries traced")
    events = api.ok("GET", trace_path)["events"]
    assert [(e["type"], e["status"], e["retry_times"]) for e in events if e["type"] != "STORE"] == [
        ("SEND", "SUCCESS", 0),
        ("CONSUME", "FAILED", 0),
        ("CONSUME", "SUCCESS", 1),
    ]
    go(page, server, f"messages/{sent.msg_id}?topic=WebTraced")
    timeline = page.get_by_role("list", name="Trace").locator("li")
    expect(timeline.filter(has_text="CONSUME")).to_have_count(2)
    expect(timeline.filter(has_text="SEND")).to_contain_text("WebTraceSenders")
    expect(timeline.filter(has_text="CONSUME").first).to_contain_text("FAILED")
    expect(timeline.filter(has_text="CONSUME").last).to_contain_text("retry 1")
    shoot(page, "message-trace")
    assert api.get("/api/messages/7F0000010000000000000000000000FF/trace").status == 404


def _consume_events(api: Api, path: str) -> int:
    answer = api.get(path)
    if answer.status != 200:
        return 0
    return sum(1 for event in answer.body["events"] if event["type"] == "CONSUME")
