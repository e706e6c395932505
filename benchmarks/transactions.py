"""Transactional produce against the same load without transactions, and read_committed
consume throughput.

N records of 1 KiB go into a fresh 6-partition topic as fast as confluent-kafka sends
them, twice: with an idempotent producer (acks=all), and with a transactional producer
that commits every 100 ms (Kafka's design documents cite about 3% overhead there). Each
topic is then read back from the beginning, the transactional one under read_committed
(the broker stops at the LSO and sends the aborted-transaction list) and the plain one
under read_uncommitted. Results go to benchmarks/results/transactions-*.json; nothing is
asserted. The two modes alternate for ``--rounds`` rounds (the machine's load drifts);
the medians are reported. Wall-clock rates on a shared machine swing with its load, so
each run also records the broker's CPU time per MB (from /proc, for the broker started
here), which load moves far less, and the broker's CPU per transaction of one record on
each partition (the coordinator's fixed cost: AddPartitionsToTxn, EndTxn, markers).

    python -m benchmarks.transactions [--quick] [--records N] [--rounds R]
                                      [--commit-interval-ms MS]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from benchmarks.harness import add_broker_args, create_topic, write_result
from moldau.testing import BrokerProcess

PARTITIONS = 6
VALUE_BYTES = 1024
POOL = 1024  # distinct pre-built values, reused round robin
STALL_S = 60.0
PRODUCER_TUNING: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "compression.type": "none",
    "acks": "all",
    "delivery.report.only.error": True,
}
CONSUMER_TUNING: dict[str, Any] = {
    "group.id": "moldau-bench-txn",
    "enable.auto.commit": False,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 32 * 1024 * 1024,
    "queued.max.messages.kbytes": 1_048_576,
    "queued.min.messages": 10_000_000,
}


CpuClock = Callable[[], float]


@contextmanager
def broker(args: argparse.Namespace) -> Iterator[tuple[str, CpuClock | None]]:
    """The broker under test and a reader of its CPU seconds (None for --bootstrap)."""
    if args.bootstrap:
        yield args.bootstrap, None
        return
    overrides = dict(pair.split("=", 1) for pair in args.broker_override)
    with BrokerProcess(configs=overrides) as process:
        assert process.proc is not None
        stat = f"/proc/{process.proc.pid}/stat"
        ticks = os.sysconf("SC_CLK_TCK")

        def cpu_seconds() -> float:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

        yield process.bootstrap, cpu_seconds


@contextmanager
def measured(out: dict[str, Any], cpu: CpuClock | None, mb: float) -> Iterator[None]:
    """Adds the broker's CPU ms per MB moved by the block to ``out``."""
    before = cpu() if cpu is not None else 0.0
    yield
    if cpu is not None:
        out["broker_cpu_ms_per_MB"] = round((cpu() - before) * 1000 / mb, 2)


def _values() -> list[bytes]:
    return [(f"{i:08d}".encode() * (VALUE_BYTES // 8 + 1))[:VALUE_BYTES] for i in range(POOL)]


def produce(
    bootstrap: str, topic: str, records: int, transactional: bool, interval_ms: int
) -> dict[str, Any]:
    config = {"bootstrap.servers": bootstrap, **PRODUCER_TUNING}
    if transactional:
        config["transactional.id"] = f"bench-{topic}"
    else:
        config["enable.idempotence"] = True
    producer = Producer(config)
    values = _values()
    transactions = 0
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    start = time.perf_counter()
    next_commit = start + interval_ms / 1000
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i % POOL], partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if transactional and i % 256 == 255 and time.perf_counter() >= next_commit:
            producer.commit_transaction(STALL_S)
            transactions += 1
            producer.begin_transaction()
            next_commit = time.perf_counter() + interval_ms / 1000
    if transactional:
        producer.commit_transaction(STALL_S)
        transactions += 1
    else:
        producer.flush(STALL_S)
    elapsed = time.perf_counter() - start
    return {
        "mode": "transactional" if transactional else "idempotent",
        "records": records,
        "transactions": transactions,
        "seconds": round(elapsed, 3),
        "records_per_s": round(records / elapsed),
        "MB_per_s": round(records * VALUE_BYTES / elapsed / 1e6, 1),
    }


def small_transactions(
    bootstrap: str, topic: str, count: int, cpu: CpuClock | None
) -> dict[str, Any]:
    """``count`` transactions of one record per partition, one after the other."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-small-{topic}", "linger.ms": 0}
    )
    producer.init_transactions(30)

    def one() -> None:
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.produce(topic, b"v", partition=p)
        producer.commit_transaction(STALL_S)

    for _ in range(10):  # warm-up
        one()
    before = cpu() if cpu is not None else 0.0
    start = time.perf_counter()
    for _ in range(count):
        one()
    elapsed = time.perf_counter() - start
    out: dict[str, Any] = {"transactions": count, "ms_each": round(elapsed * 1000 / count, 2)}
    if cpu is not None:
        out["broker_cpu_ms_each"] = round((cpu() - before) * 1000 / count, 2)
    return out


def consume(bootstrap: str, topic: str, records: int, isolation: str) -> dict[str, Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": isolation, **CONSUMER_TUNING}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    last_progress = start
    while got < records:
        batch = consumer.consume(100_000, timeout=0.5)
        got += sum(1 for m in batch if m.error() is None)
        now = time.perf_counter()
        if batch:
            last_progress = now
        elif now - last_progress > STALL_S:
            break
    elapsed = time.perf_counter() - start
    consumer.close()
    return {
        "isolation": isolation,
        "records": got,
        "seconds": round(elapsed, 3),
        "records_per_s": round(got / elapsed),
        "MB_per_s": round(got * VALUE_BYTES / elapsed / 1e6, 1),
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (all its figures, so they stay consistent)."""
    ranked = sorted(runs, key=lambda r: r["records_per_s"])
    middle = statistics.median_low([r["records_per_s"] for r in ranked])
    return next(r for r in ranked if r["records_per_s"] == middle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_broker_args(parser)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    records = 10_000 if args.quick else args.records
    rounds = 1 if args.quick else args.rounds
    runs: dict[str, Any] = {"produce": [], "consume": []}
    mb = records * VALUE_BYTES / 1e6
    with broker(args) as (bootstrap, cpu):
        for transactional in (False, True):  # warm-up: coordinator, connections
            topic = create_topic(bootstrap, "txn-bench", PARTITIONS)
            produce(bootstrap, topic, min(records, 5_000), transactional, args.commit_interval_ms)
        for _ in range(rounds):
            for transactional in (False, True):
                topic = create_topic(bootstrap, "txn-bench", PARTITIONS)
                run: dict[str, Any] = {}
                with measured(run, cpu, mb):
                    run |= produce(
                        bootstrap, topic, records, transactional, args.commit_interval_ms
                    )
                runs["produce"].append(run)
                isolation = "read_committed" if transactional else "read_uncommitted"
                run = {}
                with measured(run, cpu, mb):
                    run |= consume(bootstrap, topic, records, isolation)
                runs["consume"].append(run)
        small = small_transactions(
            bootstrap,
            create_topic(bootstrap, "txn-small", PARTITIONS),
            20 if args.quick else 300,
            cpu,
        )
    results: dict[str, Any] = {
        "small_transactions": small,
        "runs": runs,
        "produce": [_median(runs["produce"][i::2]) for i in (0, 1)],
        "consume": [_median(runs["consume"][i::2]) for i in (0, 1)],
    }
    plain, txn = results["produce"]
    results["transactional_overhead_pct"] = round(
        100 * (plain["records_per_s"] - txn["records_per_s"]) / plain["records_per_s"], 1
    )
    cpu_figures = [r.get("broker_cpu_ms_per_MB") for r in runs["produce"]]
    if cpu_figures and None not in cpu_figures:
        plain_cpu = statistics.median(cpu_figures[0::2])
        txn_cpu = statistics.median(cpu_figures[1::2])
        results["broker_cpu_ms_per_MB_median"] = {"idempotent": plain_cpu, "transactional": txn_cpu}
        results["transactional_broker_cpu_overhead_pct"] = round(
            100 * (txn_cpu - plain_cpu) / plain_cpu, 1
        )
    path = write_result("transactions", args, results)
    table = Table(title=f"transactions ({records} x {VALUE_BYTES} B, {PARTITIONS} partitions)")
    for column in ("what", "records/s", "MB/s", "seconds", "transactions", "broker CPU ms/MB"):
        table.add_column(column)
    for r in results["produce"]:
        table.add_row(f"produce {r['mode']}", str(r["records_per_s"]), str(r["MB_per_s"]),
                      str(r["seconds"]), str(r["transactions"]),
                      str(r.get("broker_cpu_ms_per_MB", "-")))  # fmt: skip
    for r in results["consume"]:
        table.add_row(f"consume {r['isolation']}", str(r["records_per_s"]), str(r["MB_per_s"]),
                      str(r["seconds"]), "", str(r.get("broker_cpu_ms_per_MB", "-")))  # fmt: skip
    console = Console()
    console.print(table)
    console.print(
        f"{small['transactions']} transactions of {PARTITIONS} records: {small['ms_each']} ms "
        f"each, broker CPU {small.get('broker_cpu_ms_each', '-')} ms each"
    )
    console.print(
        f"transactional overhead: {results['transactional_overhead_pct']}% of throughput, "
        f"{results.get('transactional_broker_cpu_overhead_pct', '-')}% of broker CPU "
        f"(medians)  ({path})"
    )


if __name__ == "__main__":
    main()
