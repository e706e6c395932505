"""Spark's Kafka schema and its Arrow twin; consumed messages become one RecordBatch per chunk.

Tasks yield Arrow batches (not tuples) because Spark then skips per-row conversion; the
Arrow types must match the Spark schema exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

SPARK_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_SPARK = "headers array<struct<key:string,value:binary>>"

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_TIMESTAMP = pa.timestamp("us", tz="UTC")

# librdkafka's timestamp type -> Kafka's TimestampType id, which is what Spark reports.
_TIMESTAMP_TYPE_ID = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}


def spark_schema(include_headers: bool) -> str:
    return f"{SPARK_SCHEMA}, {HEADERS_SPARK}" if include_headers else SPARK_SCHEMA


def arrow_schema(include_headers: bool, value: pa.DataType | None = None) -> pa.Schema:
    """`value` replaces the binary value's type (a value format's decoded struct)."""
    fields = [
        ("key", pa.binary()),
        ("value", value or pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", _TIMESTAMP),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", HEADERS_TYPE))
    return pa.schema(fields)


def to_record_batch(
    messages: Sequence[Message], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Columns built from whole lists at once: one pass per attribute, no row objects."""
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    millis = pa.array([ts for _, ts in stamps], pa.int64())
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pc.multiply(millis, 1000).cast(_TIMESTAMP),
        pa.array([_TIMESTAMP_TYPE_ID.get(kind, -1) for kind, _ in stamps], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([m.headers() for m in messages], HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
