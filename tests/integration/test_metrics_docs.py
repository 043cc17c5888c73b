"""docs/metrics.md run as written: its Python example against a real `tidemq serve
--http-port 0` (the name server and HTTP addresses substituted), and the curl
line's page parsed."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_examples import DEFAULT_NAMESRV, blocks, run_python

from tidemq.testing.metrics import sample_value, scrape
from tidemq.testing.processes import serve

pytestmark = pytest.mark.slow

DOC_HTTP = "127.0.0.1:8080"


def test_the_metrics_guide_runs_as_written(tmp_path: Path) -> None:
    examples = blocks("metrics.md", "python")
    assert examples, "docs/metrics.md has a Python example"
    with serve(tmp_path / "data", http=True) as server:
        for index, code in enumerate(examples):
            assert DEFAULT_NAMESRV in code and DOC_HTTP in code
            result = run_python(
                code,
                tmp_path / f"example_{index}.py",
                {"PATH": "/usr/bin:/bin", "TIDEMQ_OFFSET_STORE_DIR": str(tmp_path / "offsets")},
                replace={DEFAULT_NAMESRV: server.namesrv, DOC_HTTP: server.http},
            )
            assert result.returncode == 0, f"example {index} failed:\n{code}\n{result.stderr}"
            assert "messages in: normal 3.0" in result.stdout
        families = scrape(server.http)  # the curl line's page
        assert sample_value(families, "rocketmq_topic_number", node_type="broker") is not None
