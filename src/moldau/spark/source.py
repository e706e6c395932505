"""The `moldau` Python data source: Spark's Kafka source and sink, over a real Kafka client.

Same columns and options as `format("kafka")`, so jobs port by changing the format:

    spark.dataSource.register(MoldauDataSource)   # or moldau.spark.session.local_session()
    df = (spark.readStream.format("moldau")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").option("maxOffsetsPerTrigger", 100_000).load())
    df.writeStream.format("moldau").option("kafka.bootstrap.servers", "127.0.0.1:9092")
      .option("topic", "copy").option("checkpointLocation", "/tmp/ck").start()

Batch writes need `.mode("append")`: Spark only lets Python data sources append/overwrite.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from moldau.spark.arrow import arrow_schema, spark_schema
from moldau.spark.ledger import ensure_topic
from moldau.spark.options import parse_read_options, parse_write_options, read_value_format
from moldau.spark.reader import MoldauBatchReader, MoldauStreamReader
from moldau.spark.writer import MoldauBatchWriter, MoldauStreamWriter


class MoldauDataSource(DataSource):
    """`spark.read.format("moldau")`, `readStream`, `write` and `writeStream`."""

    @classmethod
    def name(cls) -> str:
        return "moldau"

    def schema(self) -> str | StructType:
        """Kafka's columns; with `valueFormat`, `value` is a struct of the latest schema."""
        headers = self.options.get("includeheaders", "false").lower() == "true"
        fmt = read_value_format(self.options)
        if fmt is None:
            return spark_schema(headers)
        return from_arrow_schema(arrow_schema(headers, fmt.arrow_type))

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_write_options(self.options)
        if options.exactly_once:
            ensure_topic(options.client)
        return MoldauBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_write_options(self.options)
        ensure_topic(options.client)
        return MoldauStreamWriter(options)
