"""What the benchmarks share: a broker to measure, topic setup, and JSON result files.

Run benchmarks from the repository root as modules (`python -m benchmarks.latency`).
Brokers are `moldau.testing.BrokerProcess`es, as in the integration tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing import BrokerProcess

RESULTS = Path(__file__).parent / "results"


def add_broker_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        help="measure this running broker (any Kafka) instead of starting a Moldau subprocess",
    )
    parser.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="server property for the started broker (repeatable)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")


@contextmanager
def broker(args: argparse.Namespace) -> Iterator[str]:
    """Bootstrap address of the broker under test, started here unless --bootstrap."""
    if args.bootstrap:
        yield args.bootstrap
        return
    overrides = dict(pair.split("=", 1) for pair in args.broker_override)
    with BrokerProcess(configs=overrides) as process:
        yield process.bootstrap


def create_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """A fresh, uniquely named topic, so repeated runs against one broker never mix."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1)
    admin.create_topics([topic], operation_timeout=30)[name].result()
    _wait_for_leaders(admin, name, partitions)
    return name


def _wait_for_leaders(admin: AdminClient, topic: str, partitions: int) -> None:
    """Metadata may lag creation; measuring before leaders exist would time retries."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        ready = meta is not None and meta.error is None and len(meta.partitions) == partitions
        if ready and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no leaders after 30 s")


def write_result(name: str, args: argparse.Namespace, results: object) -> Path:
    """benchmarks/results/<name>-<UTC time>.json with the environment alongside the numbers."""
    now = datetime.now(UTC)
    document = {
        "benchmark": name,
        "time": now.isoformat(timespec="seconds"),
        "broker": getattr(args, "bootstrap", None) or "moldau subprocess",
        "args": vars(args),
        "environment": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
        },
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{now:%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def seconds_to_first_record(config: dict[str, Any], topic: str, timeout_s: float) -> float:
    """Seconds from a new consumer's subscribe() to the first record its poll() returns."""
    consumer = Consumer(config)
    try:
        start = time.monotonic()
        consumer.subscribe([topic])
        while time.monotonic() - start < timeout_s:
            msg = consumer.poll(0.01)
            if msg is not None and msg.error() is None:
                return time.monotonic() - start
        raise RuntimeError(f"no record within {timeout_s} s")
    finally:
        consumer.close()
