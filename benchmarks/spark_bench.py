"""Throughput of the `moldau` Spark data source: batch read, batch write, streaming copy.

Produces `--records` (2M) records of `--size` (100) bytes with a plain idempotent producer,
then times Spark reading them all (cold, then warm), writing them to another topic in
batch, and copying them with a streaming query (`Trigger.AvailableNow`); both writes with
the exactly-once sink (a transaction per task) and with the at-least-once sink (idempotent
producer). Never asserts.

    python -m benchmarks.spark_bench [--records N] [--master local[4]] [--quick]
        [--max-offsets-per-trigger N] [--rounds N] [--read-only]

`--read-only` measures batch reads alone, as issue 23 compares them with Spark's Kafka
connector: for each reader (`native`: fetched batches decoded in bulk; `librdkafka`: record
by record) one warm-up read, then `--rounds` reads taking turns between the readers, the
best of each reported, with the load average before each read and the CPU seconds per
million rows of Spark's Python workers and of the JVM (from `/proc`: CPU per row moves far
less with the machine's load than rows/s do).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql import DataFrameReader, SparkSession

from benchmarks.harness import add_broker_args, broker, create_topic, write_result
from moldau.spark.session import local_session


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


def timed(action: Callable[[], int]) -> dict[str, int]:
    started = time.perf_counter()
    rows = action()
    return {"rows": rows, "rows_per_s": round(rows / (time.perf_counter() - started))}


def _descendants_cpu() -> tuple[float, float]:
    """CPU seconds so far of Spark's processes: (the JVM's Python children, the JVM).

    Python workers are forked by PySpark's daemons; a daemon's reaped children count in
    its own `cutime`/`cstime`, so they are included. The broker (another child of this
    process) is not.
    """
    stats: dict[int, tuple[int, list[int], str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            exe = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        stats[int(entry)] = (int(fields[1]), [int(x) for x in fields[11:15]], exe)

    def ancestors(pid: int) -> Iterator[int]:
        while pid in stats and pid > 1:
            pid = stats[pid][0]
            yield pid

    mine = {pid for pid in stats if os.getpid() in ancestors(pid)}
    jvms = {pid for pid in mine if stats[pid][2].endswith("/java")}
    python = jvm = 0
    for pid, (_, times, _) in stats.items():
        if pid in jvms:
            jvm += times[0] + times[1]
            continue
        if not jvms.isdisjoint(ancestors(pid)):
            python += sum(times)
    tick = os.sysconf("SC_CLK_TCK")
    return python / tick, jvm / tick


def measure_reads(read: Callable[[str], int], readers: list[str], rounds: int) -> dict:
    """A warm-up read per reader, then `rounds` timed reads of each, in turns."""
    for name in readers:
        read(name)
    out: dict = {name: {"runs": []} for name in readers}
    for _ in range(rounds):
        for name in readers:
            load = os.getloadavg()[0]
            python, jvm = _descendants_cpu()
            run = timed(lambda n=name: read(n))
            python_after, jvm_after = _descendants_cpu()
            per_m = 1e6 / max(run["rows"], 1)
            out[name]["runs"].append(
                {
                    **run,
                    "load_avg_1m": round(load, 2),
                    "python_cpu_s_per_m_rows": round((python_after - python) * per_m, 3),
                    "jvm_cpu_s_per_m_rows": round((jvm_after - jvm) * per_m, 3),
                }
            )
    for result in out.values():
        result["best_rows_per_s"] = max(r["rows_per_s"] for r in result["runs"])
    return out


def measure(spark: SparkSession, bootstrap: str, args: argparse.Namespace) -> dict:
    source = create_topic(bootstrap, "spark-in", args.partitions)
    produce_rate = produce(bootstrap, source, args.records, args.size)

    def reader(kind: str = "native") -> DataFrameReader:
        return (
            spark.read.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("reader", kind)
        )

    def batch_write(guarantee: str) -> int:
        out = create_topic(bootstrap, f"spark-out-{guarantee}", args.partitions)
        reader().load().select("key", "value").write.format("moldau").mode("append").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", out).option("deliveryGuarantee", guarantee).save()
        return args.records

    def stream_copy(guarantee: str) -> int:
        out = create_topic(bootstrap, f"spark-stream-{guarantee}", args.partitions)
        query = (
            spark.readStream.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
            .load()
            .select("key", "value")
            .writeStream.format("moldau")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out)
            .option("deliveryGuarantee", guarantee)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="moldau-bench-ck-"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)

    if args.read_only:
        return {
            "produce_rows_per_s": round(produce_rate),
            "batch_read": measure_reads(
                lambda kind: reader(kind).load().count(), ["native", "librdkafka"], args.rounds
            ),
        }
    results: dict = {
        "produce_rows_per_s": round(produce_rate),
        # The first query also pays for Spark's Python workers starting; the second is warm.
        "batch_read": timed(lambda: reader().load().count()),
        "batch_read_warm": timed(lambda: reader().load().count()),
    }
    # Rounds alternate which sink goes first, so neither always gets the cooler machine.
    guarantees = ["at-least-once", "exactly-once"]
    for round_ in range(args.rounds):
        for guarantee in guarantees if round_ % 2 == 0 else guarantees[::-1]:
            key = guarantee.replace("-", "_")
            results.setdefault(f"batch_write_{key}", []).append(
                timed(lambda g=guarantee: batch_write(g))
            )
            results.setdefault(f"stream_copy_{key}", []).append(
                timed(lambda g=guarantee: stream_copy(g))
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_broker_args(parser)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each sink (or read)")
    parser.add_argument("--read-only", action="store_true", help="batch reads alone")
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=500_000,
        help="micro-batch size of the streaming copies (one transaction per task and batch)",
    )
    args = parser.parse_args()
    if args.quick:
        args.records = 20_000
    with broker(args) as bootstrap:
        spark = local_session("moldau-bench", master=args.master)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            results = measure(spark, bootstrap, args)
        finally:
            spark.stop()
    path = write_result("spark", args, results)
    print(Path(path).read_text())


if __name__ == "__main__":
    main()
