"""Throughput of the `moldau` Spark data source: batch read, batch write, streaming write.

Produces 2M records of 100 bytes (with a plain idempotent producer), then times Spark
reading them all, Spark writing them back to another topic in batch, and a streaming copy.
Starts its own broker unless --bootstrap-server is given. Writes
`benchmarks/results/spark_bench.json`; never asserts on times.

    python -m benchmarks.spark_bench [--records N] [--master local[4]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.spark.session import local_session
from tests.broker import BrokerProcess

RESULTS = Path(__file__).parent / "results" / "spark_bench.json"


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(60)


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1024 * 1024,
        }
    )
    value = os.urandom(size)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, b"%d" % i)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(300)
    return records / (time.perf_counter() - started)


def timed(action: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    rows = action()
    return rows, rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-spark-bench-"))
    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        broker = BrokerProcess(workdir / "broker").start()
        bootstrap = broker.bootstrap
    try:
        results = run(bootstrap, args, workdir)
    finally:
        if broker is not None:
            broker.stop()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


def run(bootstrap: str, args: argparse.Namespace, workdir: Path) -> dict:
    suffix = str(int(time.time()))
    source, batch_out, stream_out = (f"bench-{n}-{suffix}" for n in ("in", "out", "stream"))
    for topic in (source, batch_out, stream_out):
        create(bootstrap, topic, args.partitions)
    produce_rate = produce(bootstrap, source, args.records, args.size)

    spark = local_session("moldau-bench", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")

    def reader():
        return (
            spark.read.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
        )

    read_rows, read_rate = timed(lambda: reader().load().count())

    def batch_write() -> int:
        reader().load().select("key", "value").write.format("moldau").mode("append").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", batch_out).save()
        return args.records

    write_rows, write_rate = timed(batch_write)

    def stream_write() -> int:
        query = (
            spark.readStream.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value")
            .writeStream.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", stream_out)
            .option("checkpointLocation", str(workdir / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)

    stream_rows, stream_rate = timed(stream_write)
    spark.stop()
    return {
        "benchmark": "spark_bench",
        "records": args.records,
        "record_bytes": args.size,
        "partitions": args.partitions,
        "master": args.master,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "produce_rows_per_s": round(produce_rate),
        "batch_read": {"rows": read_rows, "rows_per_s": round(read_rate)},
        "batch_write": {"rows": write_rows, "rows_per_s": round(write_rate)},
        "stream_copy": {"rows": stream_rows, "rows_per_s": round(stream_rate)},
    }


if __name__ == "__main__":
    main()
