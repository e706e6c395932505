"""The data source on a real Spark standalone cluster: a master and two worker JVMs.

Tasks run in executors of other processes than the driver, so everything a task needs
travels by pickling and by the executors' own broker connections, as on a real cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from moldau.spark.session import executor_pythonpath, local_session
from tests.spark.clients import create_topic, produce
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
