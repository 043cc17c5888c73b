"""The code blocks of docs/*.md, for the tests that run them as written.

A block fenced with a language that runs (```python, ```js, ```sh) must be run by a
test; RUN_BY says which test runs which, and test_docs_are_run.py checks that
no such block is left out. Blocks without a language (directory listings, the
shell lines of an install) are not run.

Each example runs in a fresh interpreter (its own process, as a user's script
would), with the default addresses replaced by a test server's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
RUNNABLE = ("python", "js", "sh")
RUN_BY = {
    ("access-control.md", "python"): "tests/integration/test_acl_docs.py",
    ("client.md", "python"): "tests/integration/test_client_docs.py",
    ("dashboard.md", "sh"): "tests/integration/test_dashboard_docs.py",
    ("grpc.md", "python"): "tests/integration/test_grpc_docs.py",
    ("grpc.md", "js"): "tests/integration/test_grpc_docs.py",
    ("metrics.md", "python"): "tests/integration/test_metrics_docs.py",
    ("replication.md", "python"): "tests/integration/test_replication_docs.py",
    ("replication.md", "sh"): "tests/integration/test_local_cluster.py",
    ("spark.md", "python"): "tests/integration/test_spark_docs.py",
    ("tls.md", "python"): "tests/integration/test_tls_docs.py",
    ("trace.md", "python"): "tests/integration/test_trace_docs.py",
}
"""(doc, language) -> the test that runs those blocks."""

DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_GRPC = "127.0.0.1:8081"
EXAMPLE_DEADLINE_S = 90


def blocks(doc: str, language: str) -> list[str]:
    """The `language` blocks of docs/`doc`, in order."""
    text = (DOCS / doc).read_text()
    return [code for tag, code in BLOCK.findall(text) if tag == language]


def languages() -> dict[tuple[str, str], int]:
    """(doc, language) -> number of blocks, for every tagged block under docs/."""
    found: dict[tuple[str, str], int] = {}
    for path in sorted(DOCS.glob("*.md")):
        for tag, _ in BLOCK.findall(path.read_text()):
            if tag:
                found[(path.name, tag)] = found.get((path.name, tag), 0) + 1
    return found


def run_python(
    code: str,
    script: Path,
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    replace: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Write `code` (addresses replaced) to `script` and run it with this interpreter."""
    for old, new in (replace or {}).items():
        code = code.replace(old, new)
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=EXAMPLE_DEADLINE_S,
        check=False,
        env=dict(env),
        cwd=cwd,
    )
