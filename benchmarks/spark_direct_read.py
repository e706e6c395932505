"""Spark's direct read of the remote tier (`remoteStorage.directRead`) against the same
read through the brokers.

For each store of `--stores` (`file`: a directory; `s3`: a local SeaweedFS), one broker
tiers a `--partitions`-partition topic of `--mib` MiB (`--size`-byte values,
`--segment-mib` MiB segments, `local.retention.bytes=1`); once every partition keeps at
most its active segment on the disk, a local Spark (`--master`, `local[2]`) counts the
topic's rows through the brokers and with the direct read, one warm-up each and then
`--rounds` rounds taking turns (the direct read's planning on the driver is also timed
alone, with its task count). Reported per read: rows/s, MiB/s and the broker's CPU
seconds (user + system, from /proc), with the load average before it; the `uptime` line
before and after each store. The store runs on the same machine, so the direct read's
figures bound Spark's decoding and the local store, not a network. Nothing is asserted.

    PYTHONPATH=src python -m benchmarks.spark_direct_read
    PYTHONPATH=src python -m benchmarks.spark_direct_read --quick
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.harness import write_result
from benchmarks.spark_bench import produce
from benchmarks.tiered_broker import wait
from moldau.spark.options import parse_read_options
from moldau.spark.reader import MoldauBatchReader, RemoteSegmentPartition
from moldau.spark.remote_plan import local_log_starts
from moldau.spark.session import local_session
from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from moldau.testing.seaweedfs import SeaweedFS

MIB = 1 << 20
TOPIC = "direct-bench"
CLASS_NAME = "remote.log.storage.manager.class.name"


@contextlib.contextmanager
def store_settings(kind: str) -> Iterator[dict[str, str]]:
    """The remote storage manager settings (broker keys) of a fresh store of `kind`."""
    if kind == "s3":
        with SeaweedFS() as server:
            yield {CLASS_NAME: "s3", **server.rsm_configs("rsm.config.")}
    else:
        with tempfile.TemporaryDirectory(prefix="moldau-bench-remote-") as directory:
            yield {CLASS_NAME: "file", "rsm.config.dir": directory}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def local_segments(b: BrokerProcess, partition: int) -> int:
    return len(list(next(b.data_dir.rglob(f"{TOPIC}-{partition}")).glob("*.log")))


def measure_store(spark: SparkSession, kind: str, args: argparse.Namespace) -> dict[str, Any]:
    with store_settings(kind) as store:
        configs = {
            "remote.log.storage.system.enable": "true",
            **store,
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "500",
            "remote.log.metadata.topic.num.partitions": "3",
        }
        with broker(**configs) as b:
            b.create_topic(
                TOPIC,
                args.partitions,
                remote_storage_enable="true",
                segment_bytes=str(args.segment_mib * MIB),
                local_retention_bytes="1",
                retention_ms="-1",
                file_delete_delay_ms="0",
            )
            records = args.mib * MIB // args.size
            produce_rate = produce(b.bootstrap, TOPIC, records, args.size)
            started = time.monotonic()
            wait(
                lambda: all(local_segments(b, p) <= 1 for p in range(args.partitions)),
                "every closed segment to leave the disk",
                timeout=1800,
            )
            tiered_s = time.monotonic() - started
            assert b.proc is not None
            pid = b.proc.pid
            client = {"bootstrap.servers": b.bootstrap}
            partitions = [(TOPIC, p) for p in range(args.partitions)]
            local_start = sum(local_log_starts(client, partitions).values())
            base = {"kafka.bootstrap.servers": b.bootstrap, "subscribe": TOPIC}
            ways = {
                "brokers": base,
                "direct": {**base, "remoteStorage.directRead": "true", **store},
            }

            def read(way: str) -> dict[str, Any]:
                before_load, cpu = os.getloadavg()[0], cpu_seconds(pid)
                started = time.perf_counter()
                rows = spark.read.format("moldau").options(**ways[way]).load().count()
                elapsed = time.perf_counter() - started
                if rows != records:
                    raise RuntimeError(f"{way}: {rows} rows, {records} produced")
                return {
                    "rows_per_s": round(rows / elapsed),
                    "mib_per_s": round(records * args.size / MIB / elapsed, 1),
                    "seconds": round(elapsed, 2),
                    "broker_cpu_s": round(cpu_seconds(b.proc.pid) - cpu, 2),  # type: ignore[union-attr]
                    "load_avg_1m": round(before_load, 2),
                }

            started = time.perf_counter()
            plan = MoldauBatchReader(parse_read_options(ways["direct"], streaming=False))
            tasks = plan.partitions()
            plan_s = time.perf_counter() - started
            uptime_before = uptime()
            for way in ways:  # warm-up: Spark's Python workers, the brokers' caches
                read(way)
            runs: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
            for n in range(args.rounds):
                for way in list(ways) if n % 2 == 0 else list(ways)[::-1]:
                    runs[way].append(read(way))
                    print(kind, way, runs[way][-1], flush=True)
            return {
                "records": records,
                "produce_rows_per_s": round(produce_rate),
                "seconds_until_tiered": round(tiered_s, 1),
                "remote_fraction": round(local_start / records, 3),
                # the direct read's driver: metadata replay and ListOffsets, then its tasks
                "direct_plan_seconds": round(plan_s, 2),
                "direct_remote_tasks": sum(isinstance(t, RemoteSegmentPartition) for t in tasks),
                "direct_tasks": len(tasks),
                "uptime_before": uptime_before,
                "uptime_after": uptime(),
                **{
                    way: {
                        "best_rows_per_s": max(r["rows_per_s"] for r in result),
                        "best_mib_per_s": max(r["mib_per_s"] for r in result),
                        "min_broker_cpu_s": min(r["broker_cpu_s"] for r in result),
                        "runs": result,
                    }
                    for way, result in runs.items()
                },
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB of values in the topic")
    parser.add_argument("--size", type=int, default=1000, help="bytes per value")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--segment-mib", type=int, default=8)
    parser.add_argument("--stores", default="file,s3")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=2, help="timed reads of each way")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    if args.quick:
        args.mib, args.segment_mib, args.rounds = 8, 1, 1
    spark = local_session("moldau-bench-direct", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {}
    try:
        for kind in args.stores.split(","):
            results[kind] = measure_store(spark, kind, args)
    finally:
        spark.stop()
    print(write_result("spark_direct_read", args, results))


if __name__ == "__main__":
    main()
