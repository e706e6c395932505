"""Batch and streaming writes land exactly once, including a replayed micro-batch."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException
from pyspark.sql import functions as F

from moldau.spark.client import DeliveryError, TransactionalProducer
from moldau.spark.compat import ADMISSION_CONTROL
from moldau.spark.ledger import EVERYTHING, TaskLedger, ensure_topic, task_name
from moldau.spark.options import parse_write_options
from moldau.spark.writer import BATCH_HEADER, Written, write_task
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


def test_ledger_remembers_the_rows_of_the_last_batch_of_each_task(broker):
    config = {"bootstrap.servers": broker.bootstrap}
    ensure_topic(config)
    first, other = TaskLedger(config, "t", "query-1", 0), TaskLedger(config, "t", "query-1", 1)
    try:
        assert first.written(0) == 0
        first.record(0, 70)
        assert first.written(0) == 70 and first.written(1) == 0 and other.written(0) == 0
        first.record(3, 5)  # batches run in order: batch 3 ran, so 0..2 are whole
        assert first.written(2) == EVERYTHING and first.written(3) == 5
        assert first.written(4) == 0
    finally:
        first.close()
        other.close()
    again = TaskLedger(config, "t", "query-1", 0)  # a new attempt, e.g. on another executor
    try:
        assert again.written(3) == 5
    finally:
        again.close()


def _batches(values: list[bytes]) -> Iterator[pa.RecordBatch]:
    yield pa.record_batch([pa.array(values, pa.binary())], names=["value"])


def test_task_attempts_after_a_commit_or_beside_a_zombie_write_once(broker):
    """The commit protocol without Spark: what a retry, a late retry and a zombie do."""
    create_topic(broker.bootstrap, "eos-task", 1)
    options = parse_write_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": "eos-task"}
    )
    ensure_topic(options.client)
    first = write_task(options, _batches([b"a", b"b"]), "w1", 0, 0, [])
    assert first == Written(2)
    # Spark never heard of the success (executor lost): the retry must skip.
    assert write_task(options, _batches([b"a", b"b"]), "w1", 0, 0, []) == Written(0, skipped=True)
    # Batch 1: a zombie attempt writes; in the middle of it, a retry of its task runs.
    zombie = TransactionalProducer(options.client, task_name("moldau-spark", "w1", 0))
    zombie.init()
    ledger = TaskLedger(options.client, "moldau-spark", "w1", 0)
    try:
        rows = _zombie_rows(options, [b"c", b"d"])
        with pytest.raises((KafkaException, DeliveryError), match="(?i)fenced"):
            zombie.write(rows, "eos-task", [], partial(ledger.entry, 1), ledger.group_metadata())
    finally:
        ledger.close()
    assert write_task(options, _batches([b"c", b"d"]), "w1", 1, 0, []) == Written(0, skipped=True)
    # Batch 2: an attempt whose input Spark cut short (its upstream failed) commits what it
    # got; the retry, with the whole input, writes only the rest.
    assert write_task(options, _batches([b"e"]), "w1", 2, 0, []) == Written(1)
    retry = write_task(options, _batches([b"e", b"f", b"g"]), "w1", 2, 0, [])
    assert retry == Written(2, skipped=True)
    want = [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
    assert [r.value for r in consume_all(broker.bootstrap, "eos-task")] == want
    everything = consume_all(broker.bootstrap, "eos-task", isolation="read_uncommitted")
    assert [r.value for r in everything].count(b"c") == 2  # the zombie's, aborted, is there


def _zombie_rows(options, values: list[bytes]) -> Iterator[pa.RecordBatch]:
    """Rows of a zombie attempt: while it is still writing, a retry of its task starts."""
    yield from _batches(values[:1])
    retry = write_task(options, _batches(values), "w1", 1, 0, [])
    assert retry == Written(len(values))
    yield from _batches(values[1:])


def _copy(spark, broker, checkpoint: Path, source: str, sink: str, guarantee: str):
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
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return query


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_stream_write_replayed_batch_is_written_once(spark, broker, tmp_path, guarantee):
    source, sink = f"copy-in-{guarantee}", f"copy-out-{guarantee}"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    rows = [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(250)]
    produced = produce(broker.bootstrap, source, rows)
    checkpoint = tmp_path / "ck"
    query = _copy(spark, broker, checkpoint, source, sink, guarantee)
    last = max(p["batchId"] for p in query.recentProgress)
    assert last >= (2 if ADMISSION_CONTROL else 0)  # before PySpark 4.2: one uncapped batch
    # A crash after the sink committed but before Spark logged the batch: Spark replays it.
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink()
    replay = _copy(spark, broker, checkpoint, source, sink, guarantee)
    assert [p["batchId"] for p in replay.recentProgress if p["numInputRows"]] == [last]
    got = consume_all(broker.bootstrap, sink)
    assert sorted(r.value for r in got) == sorted(r.value for r in produced)
    stamps = {dict(r.headers)[BATCH_HEADER].decode().split(":")[1] for r in got}
    assert stamps == {str(b) for b in range(last + 1)}
