"""tidemq for Apache Spark: the `tidemq` data source for PySpark 4.x.

`register(spark)` makes ``format("tidemq")`` known to a session. Importing
this package does not import PySpark; `register` does (install the
``spark`` extra: pyspark and pyarrow).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the `tidemq` data source with a SparkSession."""
    from tidemq.spark.datasource import TidemqDataSource

    spark.dataSource.register(TidemqDataSource)
