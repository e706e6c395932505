"""Produce and consume throughput against one broker.

For {1, 6 partitions} x {100 B, 1 KiB values} x {acks=1, acks=all}: produce N records
into a fresh topic as fast as the client can, then read them all back. The client is
tuned (large batches, deep queues, no per-record callbacks) so that the broker is what
is measured. Results go to benchmarks/results/produce_consume-*.json; nothing is asserted.

    python -m benchmarks.produce_consume [--quick] [--records N] [--client kcat]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from benchmarks.harness import add_broker_args, broker, create_topic, write_result

PARTITIONS = (1, 6)
VALUE_BYTES = (100, 1024)
ACKS = ("1", "all")
# Distinct pre-built values, reused round robin: building values must not be measured.
POOL = 1024
# A run that makes no progress for this long is reported as stalled, not waited on forever.
STALL_S = 30.0
TARGETS = {"produce_100B_rec_s": 700_000, "produce_1KiB_MB_s": 300, "consume_rec_s": 1_500_000}

PRODUCER_TUNING = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "compression.type": "none",
    "enable.idempotence": False,
    # Only failed deliveries call back into Python.
    "delivery.report.only.error": True,
}
CONSUMER_TUNING = {
    "group.id": "moldau-bench",
    "enable.auto.commit": False,
    # librdkafka wants receive.message.max.bytes (100 MB) > fetch.max.bytes + 512.
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 32 * 1024 * 1024,
    "queued.max.messages.kbytes": 1_048_576,
    # Otherwise librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) whenever 100k
    # records wait in its local queue: that measured the client (~300k rec/s), not the broker.
    "queued.min.messages": 10_000_000,
    "enable.partition.eof": False,
}


@dataclass
class Rate:
    """`timed` of the `records` moved took `seconds`, after `startup_s` not measured."""

    records: int
    seconds: float
    errors: int = 0
    timed: int | None = None
    startup_s: float = 0.0

    def per_second(self, value_bytes: int) -> dict[str, float]:
        timed = self.records if self.timed is None else self.timed
        return {
            "records_per_s": round(timed / self.seconds) if self.seconds else 0,
            "mb_per_s": round(timed * value_bytes / self.seconds / 1e6, 1) if self.seconds else 0,
        }


def produce_librdkafka(
    bootstrap: str, topic: str, values: list[bytes], records: int, acks: str
) -> Rate:
    failed: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            **PRODUCER_TUNING,
            "on_delivery": lambda error, _message: failed.append(error),
        }
    )
    send = producer.produce
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                send(topic, values[i % POOL])
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush()
    return Rate(records, time.perf_counter() - start, len(failed))


def consume_librdkafka(bootstrap: str, topic: str, partitions: int, records: int) -> Rate:
    """Timed from the first batch on: before it, librdkafka spends ~0.5 s on its own
    offset lookup, which would swamp shorter runs."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_TUNING})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received = errors = first_batch = 0
    start = last_progress = time.perf_counter()
    while received < records and time.perf_counter() - last_progress < STALL_S:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        if batch:
            failed = sum(1 for m in batch if m.error() is not None)
            errors += failed
            if not received:
                first_batch, start_s = len(batch) - failed, time.perf_counter() - start
            received += len(batch) - failed
            last_progress = time.perf_counter()
    consumer.close()
    if received == first_batch:  # all in one batch: only the total time is known
        return Rate(received, last_progress - start, errors)
    seconds = last_progress - start - start_s
    return Rate(received, seconds, errors, timed=received - first_batch, startup_s=start_s)


def produce_kcat(bootstrap: str, topic: str, values: list[bytes], records: int, acks: str) -> Rate:
    with tempfile.TemporaryFile() as source:
        for start in range(0, records, POOL):
            source.write(b"\n".join(values[: records - start]) + b"\n")
        source.seek(0)
        settings = [f"-X{k}={str(v).lower()}" for k, v in PRODUCER_TUNING.items()]
        settings.remove("-Xdelivery.report.only.error=true")
        command = ["kcat", "-P", "-q", "-b", bootstrap, "-t", topic, f"-Xacks={acks}", *settings]
        return _timed(command, records, stdin=source)


def consume_kcat(bootstrap: str, topic: str, partitions: int, records: int) -> Rate:
    settings = [f"-X{k}={v}" for k, v in CONSUMER_TUNING.items() if k != "enable.partition.eof"]
    command = ["kcat", "-C", "-q", "-e", "-o", "beginning", "-c", str(records), "-b", bootstrap]
    return _timed([*command, "-t", topic, *settings], records, stdout=subprocess.DEVNULL)


def _timed(command: list[str], records: int, **streams) -> Rate:
    start = time.perf_counter()
    done = subprocess.run(command, stderr=subprocess.PIPE, timeout=600, **streams)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[:2]} failed: {done.stderr.decode()[-2000:]}")
    return Rate(records, seconds)


CLIENTS = {
    "librdkafka": (produce_librdkafka, consume_librdkafka),
    "kcat": (produce_kcat, consume_kcat),
}


def make_values(size: int) -> list[bytes]:
    """Distinct random values, printable so that kcat can read them as lines."""
    printable = bytes(33 + b % 94 for b in range(256))
    return [os.urandom(size).translate(printable) for _ in range(POOL)]


def run(args: argparse.Namespace) -> list[dict]:
    produce, consume = CLIENTS[args.client]
    results = []
    with broker(args) as bootstrap:
        for partitions, size, acks in itertools.product(PARTITIONS, VALUE_BYTES, ACKS):
            records = min(args.records, args.max_mb * 1_000_000 // size)
            topic = create_topic(bootstrap, f"bench-p{partitions}-{size}b-acks{acks}", partitions)
            produced = produce(bootstrap, topic, make_values(size), records, acks)
            consumed = consume(bootstrap, topic, partitions, records)
            results.append(
                {
                    "partitions": partitions,
                    "value_bytes": size,
                    "acks": acks,
                    "produce": asdict(produced) | produced.per_second(size),
                    "consume": asdict(consumed) | consumed.per_second(size),
                }
            )
            print(f"done: {topic} ({records} records)", flush=True)
    return results


def print_summary(results: list[dict]) -> None:
    table = Table(
        "parts", "value", "acks", "produce rec/s", "MB/s", "consume rec/s", "MB/s", "missing",
        title=f"targets: {TARGETS}",
    )  # fmt: skip
    for result in results:
        produce, consume = result["produce"], result["consume"]
        table.add_row(
            str(result["partitions"]),
            f"{result['value_bytes']} B",
            result["acks"],
            f"{produce['records_per_s']:,}",
            f"{produce['mb_per_s']:,}",
            f"{consume['records_per_s']:,}",
            f"{consume['mb_per_s']:,}",
            str(produce["records"] - consume["records"] + produce["errors"]),
        )
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_broker_args(parser)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per case")
    parser.add_argument("--max-mb", type=int, default=200, help="cap on value bytes per case (MB)")
    parser.add_argument("--client", choices=sorted(CLIENTS), default="librdkafka")
    args = parser.parse_args()
    if args.quick:
        args.records, args.max_mb = 20_000, 10
    results = run(args)
    print_summary(results)
    path = write_result("produce_consume", args, {"targets": TARGETS, "cases": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
