"""Batch and streaming reads against a real broker, checked against what was acknowledged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.spark.compat import ADMISSION_CONTROL
from tests.spark.clients import Rec, create_topic, produce, transaction, wait_stable

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def _rows(n: int, partitions: int) -> list[tuple[int, bytes, bytes]]:
    return [(i % partitions, b"k%d" % i, b"value-%d" % i) for i in range(n)]


def _reader(spark, broker, topic: str, **options: str):
    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
    reader = reader.option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _as_recs(rows) -> list[Rec]:
    return [
        Rec(
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            tuple((h["key"], h["value"]) for h in r.asDict().get("headers") or ()),
            int(r["timestamp"].timestamp() * 1000),
        )
        for r in rows
    ]


def test_batch_read_is_one_task_per_partition_with_every_record_in_order(spark, broker):
    create_topic(broker.bootstrap, "read-all", 3)
    produced = produce(
        broker.bootstrap,
        "read-all",
        _rows(600, 3),
        headers=[("h", b"1")],
        timestamps=[T0 + i for i in range(600)],
    )
    df = _reader(spark, broker, "read-all", includeHeaders="true").load()
    assert df.rdd.getNumPartitions() == 3
    per_task = df.rdd.glom().collect()
    for p, task_rows in enumerate(per_task):
        assert _as_recs(task_rows) == [r for r in produced if r.partition == p]
    assert {r["timestampType"] for r in df.select("timestampType").collect()} == {0}
    assert {r["topic"] for r in df.select("topic").collect()} == {"read-all"}


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_native_reader_returns_what_was_acknowledged_as_librdkafka_does(spark, broker, compression):
    """Fetched batches decoded in bulk: null and empty keys and values, sizes that vary by
    row and in runs, compressed batches; same rows, same order per partition."""
    topic = f"read-native-{compression}"
    create_topic(broker.bootstrap, topic, 2)
    sizes = [0, 3, 100, 100, 100, 100, 700, 5000]
    rows = [
        (
            i % 2,
            None if i % 7 == 0 else b"k%d" % i,
            None if i % 13 == 0 else bytes([i % 251]) * sizes[(i // 40) % len(sizes)],
        )
        for i in range(800)
    ]
    produced = produce(
        broker.bootstrap,
        topic,
        rows,
        timestamps=[T0 + i for i in range(800)],
        config={"compression.type": compression, "linger.ms": "50"},
    )
    native = _reader(spark, broker, topic).load().rdd.glom().collect()
    records = _reader(spark, broker, topic, reader="librdkafka").load().rdd.glom().collect()
    for p in range(2):
        assert _as_recs(native[p]) == [r for r in produced if r.partition == p]
        assert native[p] == records[p]


def test_min_partitions_splits_ranges_without_gaps_or_overlap(spark, broker):
    create_topic(broker.bootstrap, "read-split", 2)
    produced = produce(broker.bootstrap, "read-split", _rows(1000, 2))
    df = _reader(spark, broker, "read-split", minPartitions="8").load()
    assert df.rdd.getNumPartitions() >= 8
    got = sorted(_as_recs(df.collect()), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset, r.value) for r in got] == [
        (r.partition, r.offset, r.value) for r in produced
    ]


def test_starting_and_ending_offsets_json(spark, broker):
    create_topic(broker.bootstrap, "read-json", 3)
    produced = produce(broker.bootstrap, "read-json", _rows(300, 3))
    df = _reader(
        spark,
        broker,
        "read-json",
        startingOffsets=json.dumps({"read-json": {"0": 10, "1": -2, "2": -1}}),
        endingOffsets=json.dumps({"read-json": {"0": 20, "1": 50, "2": -1}}),
    ).load()
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    want = [
        (r.partition, r.offset)
        for r in produced
        if (r.partition == 0 and 10 <= r.offset < 20) or (r.partition == 1 and r.offset < 50)
    ]
    assert got == want


def test_starting_timestamps(spark, broker):
    create_topic(broker.bootstrap, "read-time", 2)
    stamps = [T0 + 1000 * i for i in range(100)]
    produced = produce(broker.bootstrap, "read-time", _rows(100, 2), timestamps=stamps)
    cut = T0 + 1000 * 60
    df = _reader(spark, broker, "read-time", startingTimestamp=str(cut)).load()
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert got == [(r.partition, r.offset) for r in produced if r.timestamp >= cut]
    by_partition = json.dumps({"read-time": {"0": cut}})
    df = _reader(spark, broker, "read-time", startingOffsetsByTimestamp=by_partition).load()
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    # Partition 1 is not named, so it starts at earliest.
    assert got == [
        (r.partition, r.offset) for r in produced if r.partition == 1 or r.timestamp >= cut
    ]


def _stream(spark, broker, checkpoint: Path, output: Path, **options: str):
    reader = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return query


def _parquet_keys(spark, output: Path) -> list[tuple[str, int, int]]:
    rows = spark.read.parquet(str(output)).select("topic", "partition", "offset").collect()
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)


def test_stream_restart_from_checkpoint_has_no_loss_and_no_duplicates(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-restart", 3)
    first = produce(broker.bootstrap, "stream-restart", _rows(300, 3))
    query = _stream(
        spark,
        broker,
        tmp_path / "ck",
        tmp_path / "out",
        subscribe="stream-restart",
        maxOffsetsPerTrigger="70",
    )
    sizes = [p["numInputRows"] for p in query.recentProgress]
    assert sum(sizes) == 300
    if ADMISSION_CONTROL:
        assert max(sizes) <= 70 and len(sizes) >= 5
    second = produce(broker.bootstrap, "stream-restart", _rows(120, 3))
    _stream(
        spark,
        broker,
        tmp_path / "ck",
        tmp_path / "out",
        subscribe="stream-restart",
        maxOffsetsPerTrigger="70",
    )
    want = sorted(("stream-restart", r.partition, r.offset) for r in first + second)
    assert _parquet_keys(spark, tmp_path / "out") == want


def test_max_offsets_per_trigger_caps_every_micro_batch_from_pyspark_4_2(spark, broker):
    create_topic(broker.bootstrap, "stream-cap", 4)
    produce(broker.bootstrap, "stream-cap", _rows(1000, 4))
    sizes: list[int] = []
    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "stream-cap")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "150")
        .load()
        .writeStream.foreachBatch(lambda df, _id: sizes.append(df.count()))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sum(sizes) == 1000
    if ADMISSION_CONTROL:
        assert max(sizes) <= 150
        assert sizes.count(150) >= 6
    else:  # PySpark 4.0, 4.1: no cap; AvailableNow reads up to where the log ended at start
        assert sizes == [1000]


def test_pattern_picks_up_new_topics_from_earliest(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "pat-a", 1)
    a = produce(broker.bootstrap, "pat-a", _rows(50, 1))
    _stream(spark, broker, tmp_path / "ck", tmp_path / "out", subscribePattern="pat-.*")
    create_topic(broker.bootstrap, "pat-b", 2)
    b = produce(broker.bootstrap, "pat-b", _rows(40, 2))
    a2 = produce(broker.bootstrap, "pat-a", _rows(10, 1))
    _stream(spark, broker, tmp_path / "ck", tmp_path / "out", subscribePattern="pat-.*")
    want = sorted(
        [("pat-a", r.partition, r.offset) for r in a + a2]
        + [("pat-b", r.partition, r.offset) for r in b]
    )
    assert _parquet_keys(spark, tmp_path / "out") == want


def test_deleted_records_fail_the_query_unless_fail_on_data_loss_is_false(spark, broker):
    create_topic(broker.bootstrap, "read-lost", 1)
    produced = produce(broker.bootstrap, "read-lost", _rows(100, 1))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition("read-lost", 0, 40)]).values():
        future.result(30)
    start = json.dumps({"read-lost": {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _reader(spark, broker, "read-lost", startingOffsets=start).load().collect()
    df = _reader(spark, broker, "read-lost", startingOffsets=start, failOnDataLoss="false").load()
    assert sorted(r["offset"] for r in df.collect()) == [r.offset for r in produced[40:]]


def test_stream_resuming_into_deleted_records_fails_clearly_or_skips_ahead(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-lost", 1)
    produce(broker.bootstrap, "stream-lost", _rows(30, 1))
    _stream(spark, broker, tmp_path / "ck", tmp_path / "out", subscribe="stream-lost")
    later = produce(broker.bootstrap, "stream-lost", _rows(70, 1))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition("stream-lost", 0, 60)]).values():
        future.result(30)
    with pytest.raises(Exception, match="failOnDataLoss"):
        _stream(spark, broker, tmp_path / "ck", tmp_path / "out", subscribe="stream-lost")
    _stream(
        spark,
        broker,
        tmp_path / "ck",
        tmp_path / "out",
        subscribe="stream-lost",
        failOnDataLoss="false",
    )
    offsets = [o for _, _, o in _parquet_keys(spark, tmp_path / "out")]
    assert offsets == list(range(30)) + [r.offset for r in later if r.offset >= 60]


def test_running_stream_to_memory_sink_sees_new_records_once(spark, broker):
    create_topic(broker.bootstrap, "stream-live", 2)
    query = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "stream-live")
        .option("maxOffsetsPerTrigger", "40")
        .load()  # startingOffsets defaults to latest for streams, as in Spark's Kafka source
        .writeStream.format("memory")
        .queryName("live")
        .start()
    )
    try:
        query.processAllAvailable()
        first = produce(broker.bootstrap, "stream-live", _rows(100, 2))
        query.processAllAvailable()
        second = produce(broker.bootstrap, "stream-live", _rows(50, 2))
        query.processAllAvailable()
        got = sorted((r["partition"], r["offset"]) for r in spark.table("live").collect())
        assert got == sorted((r.partition, r.offset) for r in first + second)
        if ADMISSION_CONTROL:
            assert max(p["numInputRows"] for p in query.recentProgress) <= 40
    finally:
        query.stop()


def test_read_committed_by_default_stops_at_the_lso_and_drops_aborted(spark, broker, tmp_path):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "read-txn", 2)
    committed = [(p, b"committed-%d-%d" % (p, i)) for i in range(3) for p in (0, 1)]
    transaction(bootstrap, "rt-1", "read-txn", committed).commit_transaction(60)
    aborted = [(p, b"aborted-%d" % p) for p in (0, 1)]
    transaction(bootstrap, "rt-1", "read-txn", aborted).abort_transaction(60)
    plain = [(1, r.value) for r in produce(bootstrap, "read-txn", [(1, None, b"plain")])]
    still_open = transaction(bootstrap, "rt-2", "read-txn", [(0, b"open")])
    behind = [(0, r.value) for r in produce(bootstrap, "read-txn", [(0, None, b"behind")])]

    def values(df) -> list[tuple[int, bytes]]:
        return [(r["partition"], r["value"]) for r in df.orderBy("partition", "offset").collect()]

    # Partition 0 ends at the open transaction (its LSO): "behind" is not stable yet.
    visible = [r for r in committed if r[0] == 0] + [r for r in committed if r[0] == 1] + plain
    assert values(_reader(spark, broker, "read-txn").load()) == visible
    dirty = _reader(spark, broker, "read-txn", **{"kafka.isolation.level": "read_uncommitted"})
    want_dirty = sorted(committed + aborted + plain + [(0, b"open")] + behind)
    assert sorted(values(dirty.load())) == want_dirty
    ck, out = tmp_path / "ck", tmp_path / "out"
    _stream(spark, broker, ck, out, subscribe="read-txn")
    streamed = spark.read.parquet(str(out)).orderBy("partition", "offset")
    assert values(streamed) == visible
    still_open.commit_transaction(60)
    wait_stable(bootstrap, "read-txn", 2)
    _stream(spark, broker, ck, out, subscribe="read-txn")
    streamed = spark.read.parquet(str(out)).orderBy("partition", "offset")
    assert values(streamed) == visible[:3] + [(0, b"open")] + behind + visible[3:]
