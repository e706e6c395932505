"""End-to-end latency at a fixed, modest rate.

A producer thread sends records at --rate for --seconds, each value stamped with its
send time; a consumer in the same process (so one monotonic clock) takes the difference
on receipt. Reports p50/p90/p99/p99.9/max over the records after --warmup seconds.
Results go to benchmarks/results/latency-*.json; nothing is asserted.

    python -m benchmarks.latency [--quick] [--rate 10000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from benchmarks.harness import add_broker_args, broker, create_topic, write_result

# value = record index, send time (monotonic ns), padding
STAMP = struct.Struct(">qq")
# Once the producer is done, wait at most this long for stragglers.
DRAIN_S = 10.0
TARGET_P99_MS = 5.0
LOW_LATENCY = {"socket.nagle.disable": True, "log.connection.close": False}


class PacedProducer(threading.Thread):
    """Sends `total` stamped records at `rate` per second, catching up when late."""

    def __init__(self, bootstrap: str, topic: str, args: argparse.Namespace) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.rate = args.rate
        self.total = int(args.rate * args.seconds)
        self.padding = b"\0" * max(0, args.value_bytes - STAMP.size)
        self.failed: list[object] = []
        self.elapsed = 0.0
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": args.acks,
                "linger.ms": args.linger_ms,
                "delivery.report.only.error": True,
                "on_delivery": lambda error, _message: self.failed.append(error),
                **LOW_LATENCY,
            }
        )

    def run(self) -> None:
        start = time.monotonic()
        for i in range(self.total):
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.producer.produce(self.topic, STAMP.pack(i, time.monotonic_ns()) + self.padding)
            self.producer.poll(0)
        self.elapsed = time.monotonic() - start
        self.producer.flush()


def measure(bootstrap: str, topic: str, args: argparse.Namespace) -> dict:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "moldau-bench",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **LOW_LATENCY,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    consumer.consume(1, timeout=1.0)  # connect and start fetching before the clock runs
    producer = PacedProducer(bootstrap, topic, args)
    skip = int(args.rate * args.warmup)
    latencies: list[int] = []
    seen: set[int] = set()
    errors = 0
    producer.start()
    last = time.monotonic()
    while len(seen) < producer.total and (producer.is_alive() or time.monotonic() - last < DRAIN_S):
        # consume(n, timeout) would hold records back until n arrived or the timeout
        # passed; poll returns on the first record, then take whatever else is queued.
        first = consumer.poll(0.1)
        if first is None:
            continue
        batch = [first, *consumer.consume(1000, timeout=0)]
        now = time.monotonic_ns()
        for message in batch:
            if message.error() is not None:
                errors += 1
                continue
            index, sent = STAMP.unpack_from(message.value())
            seen.add(index)
            if index >= skip:
                latencies.append(now - sent)
        last = time.monotonic()
    producer.join()
    consumer.close()
    return {
        "sent": producer.total,
        "received": len(seen),
        "produce_errors": len(producer.failed),
        "consume_errors": errors,
        "achieved_rate": round(producer.total / producer.elapsed) if producer.elapsed else None,
        "measured_records": len(latencies),
        "latency_ms": summarize(latencies),
        "target_p99_ms": TARGET_P99_MS,
    }


def summarize(latencies_ns: list[int]) -> dict[str, float]:
    if not latencies_ns:
        return {}
    ordered = sorted(latencies_ns)

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1e6, 3)

    return {
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "p99.9": rank(0.999),
        "max": rank(1.0),
        "mean": round(sum(ordered) / len(ordered) / 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_broker_args(parser)
    parser.add_argument("--rate", type=int, default=10_000, help="records per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds not measured")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", choices=["0", "1", "all"], default="all")
    parser.add_argument("--linger-ms", type=float, default=0.0)
    args = parser.parse_args()
    if args.quick:
        args.rate, args.seconds, args.warmup = 1000, 2.0, 0.5
    with broker(args) as bootstrap:
        topic = create_topic(bootstrap, "latency", args.partitions)
        result = measure(bootstrap, topic, args)
    print(json.dumps(result, indent=2))
    print(f"wrote {write_result('latency', args, result)}")


if __name__ == "__main__":
    main()
