"""`examples/orders_pipeline.py` (what `make pipeline` runs), shortened: it
starts tidemq and Spark, streams orders through the windowed revenue job
into a topic and Parquet, and exits 0 only when every window's total equals
what it produced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidemq.spark.session import java_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="PySpark needs Java 17"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders_pipeline.py"


def test_orders_pipeline_verifies_its_windows(tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--seconds",
            "12",
            "--rate",
            "30",
            "--out",
            str(out),
            "--deadline",
            "150",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verified: every window's revenue equals what was produced" in done.stdout
    assert "lag 0" in done.stdout
    assert list(out.glob("*.parquet"))
    refused = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "is not empty" in refused.stderr
