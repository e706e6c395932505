"""Batch and streaming writes land exactly once, including a replayed micro-batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from moldau.spark.ledger import CommitLedger
from moldau.spark.writer import BATCH_HEADER
from tests.spark.clients import consume_all, create_topic, produce

pytestmark = pytest.mark.spark


def test_batch_write_lands_once_in_order_per_partition(spark, broker):
    create_topic(broker.bootstrap, "write-batch", 3)
    rows = [(f"k{i}".encode(), f"v{i}".encode(), i % 3) for i in range(3000)]
    df = spark.createDataFrame(rows, "key binary, value binary, partition int").repartition(1)
    df = df.withColumn(
        "headers", F.array(F.struct(F.lit("h").alias("key"), F.col("key").alias("value")))
    )
    df.write.format("moldau").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).option("topic", "write-batch").save()
    got = consume_all(broker.bootstrap, "write-batch")
    for p in range(3):
        assert [(r.key, r.value) for r in got if r.partition == p] == [
            (k, v) for k, v, part in rows if part == p
        ]
    assert all(r.headers == (("h", r.key),) for r in got)


def test_topic_column_routes_rows(spark, broker):
    create_topic(broker.bootstrap, "route-a", 1)
    create_topic(broker.bootstrap, "route-b", 1)
    df = spark.createDataFrame(
        [("route-a", "x"), ("route-b", "y"), ("route-a", "z")], "topic string, value string"
    ).coalesce(1)
    df.write.format("moldau").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).save()
    assert [r.value for r in consume_all(broker.bootstrap, "route-a")] == [b"x", b"z"]
    assert [r.value for r in consume_all(broker.bootstrap, "route-b")] == [b"y"]


def test_ledger_remembers_tasks_and_batches(broker):
    CommitLedger.ensure_topic({"bootstrap.servers": broker.bootstrap})
    ledger = CommitLedger({"bootstrap.servers": broker.bootstrap}, "query-1")
    other = CommitLedger({"bootstrap.servers": broker.bootstrap}, "query-2")
    assert not ledger.contains(0, 0)
    ledger.record(0, 0)
    ledger.record(0, 1)
    other.record(5, 0)
    assert ledger.contains(0, 0) and ledger.contains(0, 1)
    assert not ledger.contains(0, 2) and not ledger.contains(1, 0)
    assert not other.contains(5, 1) and not other.contains(6, 0)
    assert other.contains(4, 3)  # a later batch ran, so Spark had committed batch 4
    ledger.record(0, None)  # batch 0 committed: every task of it counts as written
    assert ledger.contains(0, 7)
    ledger.record(1, 3)
    assert ledger.contains(1, 3) and not ledger.contains(1, 0) and ledger.contains(0, 9)


def _copy(spark, broker, checkpoint: Path, source: str, sink: str):
    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .select("key", "value")
        .writeStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return query


def test_stream_write_replayed_batch_is_written_once(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "copy-in", 2)
    create_topic(broker.bootstrap, "copy-out", 2)
    rows = [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(250)]
    produced = produce(broker.bootstrap, "copy-in", rows)
    checkpoint = tmp_path / "ck"
    query = _copy(spark, broker, checkpoint, "copy-in", "copy-out")
    last = max(p["batchId"] for p in query.recentProgress)
    assert last >= 2
    # A crash after the sink committed but before Spark logged the batch: Spark replays it.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink()
    replay = _copy(spark, broker, checkpoint, "copy-in", "copy-out")
    assert [p["batchId"] for p in replay.recentProgress if p["numInputRows"]] == [last]
    got = consume_all(broker.bootstrap, "copy-out")
    assert sorted(r.value for r in got) == sorted(r.value for r in produced)
    stamps = {dict(r.headers)[BATCH_HEADER].decode().split(":")[1] for r in got}
    assert stamps == {str(b) for b in range(last + 1)}
