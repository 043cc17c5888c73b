"""A `tidemq serve --http-port 0` for the dashboard tests, and a small JSON client for its API."""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidemq import ConsumeFromWhere, PushConsumer
from tidemq.testing.processes import FAST_DELAY_LEVELS, ServerProcess, started

REQUEST_TIMEOUT_S = 30.0


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Api:
    """JSON requests to one server's HTTP endpoint, optionally with Basic credentials."""

    base: str
    user: tuple[str, str] | None = None

    def as_user(self, access_key: str, secret_key: str) -> Api:
        return Api(self.base, (access_key, secret_key))

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> Answer:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.user is not None:
            token = base64.b64encode(":".join(self.user).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return Answer(response.status, _decode(response.read()), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Answer(error.code, _decode(error.read()), dict(error.headers))

    def get(self, path: str) -> Answer:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None) -> Answer:
        return self.call("POST", path, body if body is not None else {})

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The body of a 2xx answer (an AssertionError showing the answer otherwise)."""
        answer = self.call(method, path, body)
        assert 200 <= answer.status < 300, f"{method} {path}: {answer.status} {answer.body}"
        return answer.body


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def dashboard_args(data_dir: Path, *extra: str) -> list[str]:
    """serve on free ports with the HTTP endpoint, retries fast, one retry before the DLQ."""
    return [
        "serve",
        "--data-dir",
        str(data_dir),
        "--namesrv-port",
        "0",
        "--broker-port",
        "0",
        "--no-grpc",
        "--http-port",
        "0",
        "--set",
        f"delay_levels={FAST_DELAY_LEVELS}",
        "--set",
        "max_reconsume_times=1",
        *extra,
    ]


@contextlib.contextmanager
def dashboard_server(
    home: Path, *extra: str, name: str = "serve"
) -> Iterator[tuple[ServerProcess, Api]]:
    home.mkdir(parents=True, exist_ok=True)
    with started(dashboard_args(home / "data", *extra), home, name) as (process, ready):
        yield process, Api(f"http://{ready['http']}")


def started_consumer(namesrv: str, group: str, topic: str, listener: object) -> PushConsumer:
    """A started push consumer of `topic` from its first message, retried once
    before its dead-letter queue (the lag, reset and DLQ scenarios)."""
    consumer = PushConsumer(
        group,
        namesrv=namesrv,
        listener=listener,  # type: ignore[arg-type]
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        max_reconsume_times=1,
    )
    consumer.subscribe(topic)
    consumer.start()
    return consumer
