"""Time from a group consumer's subscribe() to its first record.

For each broker `group.initial.rebalance.delay.ms` (3000: Kafka's code default; 0: what
Kafka's shipped server.properties sets), a broker subprocess is started and a single
confluent-kafka consumer with default client settings (only `auto.offset.reset=earliest`,
so a record produced beforehand can arrive) subscribes under a fresh group id per run.
Reports the median (and every run) in benchmarks/results/group_join.json; nothing is
asserted.

    python -m benchmarks.group_join [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka import Producer

from benchmarks.harness import RESULTS, create_topic, seconds_to_first_record
from moldau.testing import BrokerProcess

DELAYS_MS = (3000, 0)
TIMEOUT_S = 60.0


def subscribe_to_first_record(bootstrap: str, topic: str) -> float:
    """Seconds from subscribe() to the first record poll() returns, for a new group."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"join-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    }
    return seconds_to_first_record(config, topic, TIMEOUT_S)


def measure(delay_ms: int, runs: int) -> dict[str, object]:
    overrides = {"group.initial.rebalance.delay.ms": str(delay_ms)}
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(Path(data_dir), overrides) as broker,
    ):
        topic = create_topic(broker.bootstrap, "group-join", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, b"first")
        if producer.flush(30) != 0:
            raise RuntimeError("the record was not acknowledged")
        subscribe_to_first_record(broker.bootstrap, topic)  # warm-up: __consumer_offsets
        times_ms = [
            round(subscribe_to_first_record(broker.bootstrap, topic) * 1000, 1) for _ in range(runs)
        ]
    return {
        "group.initial.rebalance.delay.ms": delay_ms,
        "median_ms": statistics.median(times_ms),
        "runs_ms": times_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per broker setting")
    args = parser.parse_args()
    document = {
        "benchmark": "group_join",
        "metric": "subscribe() to first record, single member, default client settings",
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "results": [measure(delay, args.runs) for delay in DELAYS_MS],
    }
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(document, indent=2)
    (RESULTS / "group_join.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
