"""The data source on a real Spark standalone cluster: a master and two worker JVMs.

Tasks run in executors of other processes than the driver, so everything a task needs
travels by pickling and by the executors' own broker connections, as on a real cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from moldau.spark.session import executor_pythonpath, local_session
from tests.spark.clients import consume_all, create_topic, produce
from tests.spark.standalone import StandaloneCluster

REPO = str(Path(__file__).resolve().parents[2])

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2) as cluster:
        yield cluster


def wait_for_executors(spark: SparkSession, count: int) -> None:
    """Until `count` executors (besides the driver) are registered with the application."""
    deadline = time.monotonic() + 240
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # type: ignore[union-attr]
    while status.size() < count + 1:
        assert time.monotonic() < deadline, f"only {status.size() - 1} executors registered"
        time.sleep(0.2)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def cluster_spark(standalone: StandaloneCluster) -> Iterator[SparkSession]:
    session = local_session(
        "moldau-standalone-tests",
        master=standalone.url,
        shuffle_partitions=2,
        conf={
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": str(len(standalone.workers)),
            # Executors also unpickle functions of these tests (`tests.spark...`).
            "spark.executorEnv.PYTHONPATH": f"{executor_pythonpath()}{os.pathsep}{REPO}",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    wait_for_executors(session, len(standalone.workers))
    yield session
    session.stop()


def _executor_dir(_rows: Iterator) -> Iterator[str]:
    """The task's executor, known by its working directory (`<work>/<app>/<executor id>`)."""
    rows = list(_rows)
    yield f"{os.getcwd()}|{len(rows)}"


def test_batch_read_runs_one_task_per_partition_on_both_executors(cluster_spark, broker):
    create_topic(broker.bootstrap, "sa-batch", 4)
    produced = produce(
        broker.bootstrap, "sa-batch", [(i % 4, b"k%d" % i, b"v%d" % i) for i in range(2000)]
    )
    df = (
        cluster_spark.read.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "sa-batch")
        .load()
    )
    assert df.rdd.getNumPartitions() == 4
    per_task = df.select("partition", "offset", "key", "value").rdd.glom().collect()
    for p, rows in enumerate(per_task):
        got = [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows]
        assert got == [
            (r.partition, r.offset, r.key, r.value) for r in produced if r.partition == p
        ]
    where = df.rdd.mapPartitions(_executor_dir).collect()
    assert sorted(int(w.split("|")[1]) for w in where) == [500] * 4
    executors = {Path(w.split("|")[0]).name for w in where}
    assert len(executors) == 2, where


def test_stream_read_has_one_task_per_partition_and_every_record_once(cluster_spark, broker):
    create_topic(broker.bootstrap, "sa-stream", 4)
    rows = [(i % 4, b"k%d" % i, b"v%d" % i) for i in range(2000)]
    produced = produce(broker.bootstrap, "sa-stream", rows)
    batches: list[tuple[int, list[list[tuple[int, int, bytes]]]]] = []

    def collect(df, batch_id: int) -> None:
        tasks = df.select("partition", "offset", "value").rdd.glom().collect()
        batches.append((batch_id, [[(r[0], r[1], r[2]) for r in task] for task in tasks]))

    query = (
        cluster_spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "sa-stream")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "600")
        .load()
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    assert len(batches) >= 4
    got: dict[int, list[tuple[int, int, bytes]]] = {p: [] for p in range(4)}
    for _, tasks in batches:
        assert len(tasks) == 4  # the backlog is even, so every batch reads every partition
        for task in tasks:
            assert len({p for p, _, _ in task}) == 1  # a task reads one topic-partition
            got[task[0][0]].extend(task)
    for p in range(4):
        assert got[p] == [(r.partition, r.offset, r.value) for r in produced if r.partition == p]


ROWS_PER_TASK = 100_000  # enough that a task's transaction stays open a while
NOTE_EVERY = 10_000


def _noting(progress: str) -> Callable[[bytes], bytes]:
    """Pass values on; every NOTE_EVERY rows a task notes its row count and executor
    directory in `<batch>-<task>-<attempt>`. The first attempt of batch 0's task 1 fails
    halfway through its input (before the sink, which sees a task's rows at its end)."""
    seen: dict[str, int] = {}

    def run(value: bytes) -> bytes:
        context = TaskContext.get()
        assert context is not None
        batch = context.getLocalProperty("streaming.sql.batchId")
        name = f"{batch}-{context.partitionId()}-{context.attemptNumber()}"
        seen[name] = count = seen.get(name, 0) + 1
        if count % NOTE_EVERY == 0:
            note = Path(progress, f".{name}")
            note.write_text(f"{count} {os.getcwd()}")
            note.replace(Path(progress, name))  # readers never see a half-written note
            if name == "0-1-0" and count == ROWS_PER_TASK // 2:
                raise RuntimeError("injected failure of a first attempt")
        return value

    return run


class Watermarks:
    """Last stable offset and high watermark of a partition, from two long-lived consumers."""

    def __init__(self, bootstrap: str) -> None:
        self.committed = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
        self.dirty = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "probe",
                "isolation.level": "read_uncommitted",
            }
        )

    def __call__(self, topic: str, partition: int) -> tuple[int, int]:
        tp = TopicPartition(topic, partition)
        lso = self.committed.get_watermark_offsets(tp, timeout=30, cached=False)[1]
        return lso, self.dirty.get_watermark_offsets(tp, timeout=30, cached=False)[1]

    def close(self) -> None:
        self.committed.close()
        self.dirty.close()


def test_exactly_once_sink_survives_a_failed_task_and_a_killed_worker(
    cluster_spark, standalone, broker, tmp_path
):
    """Runs last: it leaves one worker. Output under read_committed: every row once, in order."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "sa-eos-in", 2)
    create_topic(bootstrap, "sa-eos-out", 2)
    rows = [(i % 2, None, b"v%d" % i) for i in range(4 * ROWS_PER_TASK)]
    produced = produce(bootstrap, "sa-eos-in", rows)
    progress = tmp_path / "progress"
    progress.mkdir()
    noting = F.udf(_noting(str(progress)), "binary", useArrow=False)
    query = (
        cluster_spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "sa-eos-in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(2 * ROWS_PER_TASK))
        .load()
        .select(noting("value").alias("value"), "partition")  # output partition = input's
        .writeStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "sa-eos-out")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    watermarks = Watermarks(bootstrap)
    try:
        # Kill worker 1 (with its executor) while its task of batch 1 is in the sink, with
        # rows in an open transaction: its input is all read, its partition's LSO < HW.
        doomed = str(standalone.root / "worker1")
        deadline = time.monotonic() + 300
        while True:
            notes = {f.name: f.read_text().split(" ", 1) for f in progress.glob("[0-9]*")}
            assert query.isActive, f"query ended before the kill: {query.exception()} {notes}"
            assert time.monotonic() < deadline, f"no write of batch 1 on worker 1: {notes}"
            writing = [
                name
                for name, (count, where) in notes.items()
                if name.startswith("1-")
                and where.startswith(doomed)
                and int(count) == ROWS_PER_TASK
            ]
            if writing:
                task = int(writing[0].split("-")[1])
                lso, high = watermarks("sa-eos-out", task)
                if lso < high:
                    standalone.kill_worker(1)
                    break
            time.sleep(0.02)
        query.awaitTermination(600)
        assert not query.isActive and query.exception() is None, query.exception()
    finally:
        query.stop()
        watermarks.close()
    attempts = {f.name for f in progress.glob("[0-9]*")}
    assert "0-1-1" in attempts or "0-1-2" in attempts, attempts  # the failed attempt's retry
    _, _, attempt = writing[0].split("-")
    retries = {f"1-{task}-{int(attempt) + n}" for n in (1, 2, 3)}
    assert retries & attempts, (writing, attempts)  # the killed task ran again
    got = consume_all(bootstrap, "sa-eos-out")
    for p in range(2):
        want = [r.value for r in produced if r.partition == p]
        assert [r.value for r in got if r.partition == p] == want
    # The killed attempt's rows are in the log too, aborted.
    dirty = consume_all(bootstrap, "sa-eos-out", isolation="read_uncommitted")
    assert sum(r.partition == task for r in dirty) > sum(r.partition == task for r in got)
