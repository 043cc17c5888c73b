"""A local Spark session for examples, tests and benchmarks: `local[N]` with
the `tidemq` data source registered.

PySpark runs Python workers with ``PYSPARK_PYTHON``; it is set to this
interpreter so workers import the same tidemq. The UI is off and shuffles
are small, since everything runs on one small machine.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["java_available", "local_session"]


def java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


@contextmanager
def local_session(
    app: str = "tidemq", *, cores: int = 2, conf: dict[str, str] | None = None
) -> Iterator[Any]:
    """A started SparkSession (stopped on the way out) that knows format("tidemq")."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from tidemq.spark import register

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        yield spark
    finally:
        spark.stop()
