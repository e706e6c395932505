"""Produce latency while the log cleaner compacts a large partition.

A compacted topic is filled with ``--gib`` GiB of keyed 1 KiB records while
``min.compaction.lag.ms`` keeps the cleaner away; then the lag is lowered with
IncrementalAlterConfigs and the next cleaner run compacts the whole partition in one pass.
Meanwhile a paced producer (acks=1, linger.ms=0) sends small records to another topic and
times each acknowledgement. Cleaning is seen from the data dir (``.cleaned`` files appear,
then the topic lands in ``cleaner-offset-checkpoint``). Reported: p50/p99/p99.9/max produce
latency before the trigger and from the trigger until cleaning finished, and how long
cleaning took.

Run it against any Moldau source tree to compare (the broker subprocess imports whatever
``PYTHONPATH`` points at):

    PYTHONPATH=/work/main/src python -m benchmarks.cleaner_latency --label before
    PYTHONPATH=src python -m benchmarks.cleaner_latency --label after
"""

from __future__ import annotations

import argparse
import math
import os
import random
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from benchmarks.harness import create_topic, write_result

VALUE_BYTES = 1024
KEYS = 20_000
SEGMENTS = 8  # the partition is this many sealed segments (plus the active one)
DAY_MS = 86_400_000


class PacedProducer(threading.Thread):
    """Sends ``rate`` small records per second and records (send time, ack latency)."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.rate = rate
        self.samples: list[tuple[float, float]] = []  # (send monotonic s, latency ms)
        self.errors = 0
        self.stop = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": 1,
                "linger.ms": 0,
                "socket.nagle.disable": True,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        self.poller = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.producer.poll(0.05)

    def run(self) -> None:
        self.poller.start()
        start = time.monotonic()
        i = 0
        while not self.stop.is_set():
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent = time.monotonic()

            def done(err: object, _msg: object, sent: float = sent) -> None:
                if err is not None:
                    self.errors += 1
                else:
                    self.samples.append((sent, (time.monotonic() - sent) * 1000))

            self.producer.produce(self.topic, b"x" * 100, on_delivery=done)
            i += 1
        self.producer.flush(30)


def fill(bootstrap: str, topic: str, total_bytes: int) -> float:
    """Write ``total_bytes`` of keyed values; returns seconds taken."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True,
        }
    )
    rnd = random.Random(7)
    values = [rnd.randbytes(VALUE_BYTES) for _ in range(256)]
    keys = [b"key-%06d" % k for k in range(KEYS)]
    start = time.monotonic()
    for i in range(total_bytes // VALUE_BYTES):
        while True:
            try:
                producer.produce(topic, values[i % 256], key=keys[i % KEYS])
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(600)
    return time.monotonic() - start


def percentiles(latencies: list[float]) -> dict[str, float | int]:
    if not latencies:
        return {"count": 0}
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)], 3)

    return {
        "count": len(ordered),
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "p99_9_ms": pct(99.9),
        "max_ms": round(ordered[-1], 3),
    }


def cleaning_state(partition_dir: Path, log_dir: Path, topic: str) -> tuple[bool, bool]:
    """(a cleaning pass is writing files now, the topic has been cleaned)."""
    writing = any(p.name.endswith((".cleaned", ".swap")) for p in partition_dir.iterdir())
    checkpoint = log_dir / "cleaner-offset-checkpoint"
    cleaned = checkpoint.exists() and f"{topic} 0 " in checkpoint.read_text()
    return writing, cleaned


def run(args: argparse.Namespace) -> dict:
    from moldau.testing import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="moldau-cleaner-") as tmp:
        data_dir = Path(tmp)
        overrides = {
            "log.cleaner.backoff.ms": "1000",
            "log.retention.check.interval.ms": "3600000",
            **dict(pair.split("=", 1) for pair in args.broker_override),
        }
        with BrokerProcess(data_dir, overrides, startup_timeout=120) as broker:
            bootstrap = broker.bootstrap
            admin = AdminClient({"bootstrap.servers": bootstrap})
            compacted = create_topic(bootstrap, "compacted", 1)
            resource = ConfigResource(ConfigResource.Type.TOPIC, compacted)
            total = int(args.gib * (1 << 30))
            configs = {
                "cleanup.policy": "compact",
                "segment.bytes": str(max(1 << 20, total // SEGMENTS)),
                "min.compaction.lag.ms": str(DAY_MS),
            }
            for name, value in configs.items():
                resource.add_incremental_config(
                    ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                )
            admin.incremental_alter_configs([resource])[resource].result()
            fill_s = fill(bootstrap, compacted, total + total // (2 * SEGMENTS))
            partition_dir = data_dir / f"{compacted}-0"
            size = sum(p.stat().st_size for p in partition_dir.glob("*.log"))
            latency_topic = create_topic(bootstrap, "latency", 1)
            paced = PacedProducer(bootstrap, latency_topic, args.rate)
            paced.start()
            time.sleep(1 + args.baseline_s)  # the first second connects: not measured
            trigger = time.monotonic()
            resource = ConfigResource(ConfigResource.Type.TOPIC, compacted)
            resource.add_incremental_config(
                ConfigEntry(
                    "min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET
                )
            )
            admin.incremental_alter_configs([resource])[resource].result()
            started = finished = None
            deadline = trigger + args.timeout_s
            while time.monotonic() < deadline:
                writing, cleaned = cleaning_state(partition_dir, data_dir, compacted)
                now = time.monotonic()
                if writing and started is None:
                    started = now
                if cleaned:
                    finished = now
                    break
                time.sleep(0.05)
            time.sleep(args.baseline_s)
            paced.stop.set()
            paced.join(60)
            after_size = sum(p.stat().st_size for p in partition_dir.glob("*.log"))
    end = finished or time.monotonic()
    warm = paced.samples[0][0] + 1 if paced.samples else 0
    baseline = [ms for t, ms in paced.samples if warm <= t < trigger]
    # The whole pass counts: building the offset map comes before any .cleaned file.
    during = [ms for t, ms in paced.samples if trigger <= t <= end]
    return {
        "label": args.label,
        "compacted_bytes_before": size,
        "compacted_bytes_after": after_size,
        "fill_s": round(fill_s, 2),
        "cleaning_s": round(end - trigger, 2) if finished else None,
        "first_cleaned_file_s": round(started - trigger, 2) if started else None,
        "cleaning_finished": finished is not None,
        "produce_rate": args.rate,
        "produce_errors": paced.errors,
        "baseline": percentiles(baseline),
        "during_cleaning": percentiles(during),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="run", help="name of this run, e.g. before/after")
    parser.add_argument("--gib", type=float, default=1.0, help="size of the compacted partition")
    parser.add_argument("--rate", type=int, default=1000, help="latency records per second")
    parser.add_argument("--baseline-s", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    args.bootstrap = None
    results = run(args)
    args.moldau = os.environ.get("PYTHONPATH", "")
    path = write_result(f"cleaner_latency-{args.label}", args, results)
    print(path)
    print(results)


if __name__ == "__main__":
    main()
