"""The HTTP endpoint of `tidemq serve --http-port 0`: it listens, answers, and says where."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tidemq.testing.processes import free_port, started

pytestmark = pytest.mark.slow


def test_serve_http_port_serves_metrics_and_the_api(tmp_path: Path) -> None:
    args = ["serve", "--namesrv-port", "0", "--broker-port", "0", "--no-grpc", "--http-port", "0"]
    with started(args, tmp_path, "serve") as (process, ready):
        base = f"http://{ready['http']}"
        with urllib.request.urlopen(f"{base}/api/health", timeout=10) as response:
            assert json.load(response) == {"status": "ok", "broker": "broker-a"}
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain")
        assert f"curl http://{ready['http']}/metrics" in "".join(process.output)


def test_serve_without_http_port_has_no_endpoint(tmp_path: Path) -> None:
    args = ["serve", "--namesrv-port", "0", "--broker-port", "0", "--no-grpc"]
    with started(args, tmp_path, "serve") as (_process, ready):
        assert "http" not in ready


def test_http_port_taken_is_a_clear_start_failure(tmp_path: Path) -> None:
    import socket

    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        args = [
            "serve",
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
            "--no-grpc",
            "--http-port",
            str(port),
        ]
        with (
            pytest.raises(AssertionError, match="exited with") as failure,
            started(args, tmp_path, "serve"),
        ):
            pass
    assert str(port) in str(failure.value)
