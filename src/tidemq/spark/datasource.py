"""The `tidemq` PySpark data source (Spark 4.x Python Data Source API).

    from tidemq.spark import register
    register(spark)
    df = spark.read.format("tidemq").option("topic", "Orders").load()

Options are checked on the driver when the reader or writer is made
(`tidemq.spark.options`); the work is in `source` (reads) and `sink` (writes).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from tidemq.spark.columns import READ_SCHEMA, check_write_schema
from tidemq.spark.options import read_options, write_options
from tidemq.spark.sink import TidemqBatchWriter, TidemqStreamWriter
from tidemq.spark.source import TidemqBatchReader, TidemqStreamReader

__all__ = ["TidemqDataSource"]


class TidemqDataSource(DataSource):
    """Topics as DataFrames: batch and streaming, read and write."""

    @classmethod
    def name(cls) -> str:
        return "tidemq"

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return TidemqBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TidemqStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = write_options(self.options, streaming=False)
        check_write_schema(schema.fieldNames(), options.topic)
        return TidemqBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = write_options(self.options, streaming=True)
        check_write_schema(schema.fieldNames(), options.topic)
        return TidemqStreamWriter(options)
