"""docs/dashboard.md's curl lines, run as written with bash against a real
`tidemq serve --http-port 0` (its address in place of 127.0.0.1:8080): the
lines with credentials against a server with --acl, the others against one
without. Each block must exit 0 (curl -f fails on an HTTP error) and print
what the guide says it answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from dashboard_support import dashboard_server
from doc_examples import BLOCK, DOCS, blocks

pytestmark = pytest.mark.slow

DOC_ADDRESS = "127.0.0.1:8080"
README = DOCS.parent / "README.md"
ACL = """\
accounts:
  - accessKey: adminKey01
    secretKey: adminSecret01
    admin: true
"""


def run(block: str, address: str, cwd: Path) -> list[str]:
    """The block's output lines (it must exit 0)."""
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace(DOC_ADDRESS, address)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )
    assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
    return result.stdout.replace("}{", "}\n{").splitlines()


def test_the_guide_s_curl_lines_run(tmp_path: Path) -> None:
    examples = blocks("dashboard.md", "sh")
    plain = [b for b in examples if " -u " not in b]
    with_keys = [b for b in examples if " -u " in b]
    assert plain and with_keys

    with dashboard_server(tmp_path / "plain") as (_, api):
        outputs = [run(block, api.base.removeprefix("http://"), tmp_path) for block in plain]
        readme = run(readme_curl_lines(), api.base.removeprefix("http://"), tmp_path)
    first = [json.loads(line) for line in outputs[0]]
    assert first[0] == {"status": "ok", "broker": "broker-a"}
    assert first[2]["result"] == "created" and first[3]["status"] == "SEND_OK"
    found = json.loads(outputs[1][0])
    assert [m["keys"] for m in found["messages"]] == [["order-1"]]
    assert json.loads(outputs[1][1])["messages"]
    groups = [json.loads(line) for line in outputs[2]]
    assert groups[2]["group"] == "OrderWorkers" and groups[2]["total_lag"] == 1
    # /metrics answered 200 (curl -f), then /api/cluster:
    assert json.loads(readme[-1])["brokers"][0]["broker"] == "broker-a"
    error_line = outputs[-1][0]
    assert error_line.endswith(" 404") and '"TOPIC_NOT_EXIST"' in error_line

    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    with dashboard_server(tmp_path / "acl", "--acl", str(acl)) as (_, api):
        (created,) = [run(block, api.base.removeprefix("http://"), tmp_path) for block in with_keys]
    assert json.loads(created[0])["result"] == "created"


def readme_curl_lines() -> str:
    """The curl lines of the README's "Dashboard and metrics" section (made to fail on an error)."""
    text = README.read_text()
    start = text.index("## Dashboard and metrics")
    section = text[start : text.index("\n## ", start + 1)]
    lines = [
        line.replace("curl ", "curl -sSf ", 1)
        for tag, code in BLOCK.findall(section)
        if not tag
        for line in code.splitlines()
        if line.startswith("curl ")
    ]
    assert len(lines) >= 2 and any("/metrics" in line for line in lines)
    image = DOCS / "images" / "dashboard.png"
    assert f"({image.relative_to(DOCS.parent)})" in section and image.stat().st_size < 300_000
    return "\n".join(lines)
