"""The cost of broker-side schema validation: produce throughput into a topic with
`confluent.value.schema.validation=true` vs a plain one (the same framed records, one
`moldau server` with its registry, rounds alternating so machine load hits both), and the
check alone in process (microseconds per record of `SchemaValidation.refusals` on a
1,000-record batch, uncompressed and lz4). Results in
benchmarks/results/schema_validation-*.json; nothing is asserted.

    python -m benchmarks.schema_validation [--records 100000] [--value-size 100] [--rounds 3]
    python -m benchmarks.schema_validation --check-only   # the check alone, 3 batch sizes
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from benchmarks.harness import write_result
from benchmarks.schema_registry import free_port, request, wait_ready
from moldau.config.topic import LogConfig
from moldau.records.compression import Compression
from moldau.records.record import build_batch
from moldau.server.schema_validation import SchemaValidation
from moldau.testing import BrokerProcess

BATCHES = (100, 1000, 10_000)  # records per batch for --check-only
SCHEMA = {"type": "record", "name": "Row", "fields": [{"name": "b", "type": "bytes"}]}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    """Records per second of producing `values` (acks=all, lz4, librdkafka's batching)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    failed = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) or failed:
        raise RuntimeError(f"produce to {topic}: {failed[:3]}")
    return len(values) / (time.perf_counter() - start)


class Ids:
    def __init__(self, ids: frozenset[int]) -> None:
        self.ids = ids

    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        return self.ids


def check_cost(
    value: bytes, schema_id: int, records: int = 1000, repeat: int = 200
) -> dict[str, float]:
    """Microseconds per record of the check alone, per compression of a batch of
    `records`."""
    checker = SchemaValidation(lambda _topic: replace(LogConfig(), value_schema_validation=True))
    checker.attach(Ids(frozenset({schema_id})))
    costs = {}
    for name, codec in (("none", Compression.NONE), ("lz4", Compression.LZ4)):
        batch = build_batch([(None, value)] * records, compression=codec)

        async def check(batch: bytes = batch) -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(repeat):
                assert not await checker.refusals({("t", 0): batch})
            return time.perf_counter() - start, time.process_time() - cpu

        # CPU time too: on a shared machine the wall clock mostly measures the others
        wall, cpu = asyncio.run(check())
        costs[f"us_per_record_{name}"] = round(wall / repeat * 1e6 / records, 2)
        costs[f"cpu_us_per_record_{name}"] = round(cpu / repeat * 1e6 / records, 2)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per round")
    parser.add_argument("--value-size", type=int, default=100, help="bytes after the id")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per topic")
    parser.add_argument(
        "--check-only", action="store_true", help="only the check's cost, no broker"
    )
    args = parser.parse_args()
    if args.check_only:
        value = b"\0" + (1).to_bytes(4, "big") + b"x" * args.value_size
        costs = {f"batch_{n}": check_cost(value, 1, n, max(3, 100_000 // n)) for n in BATCHES}
        path = write_result("schema_validation_check", args, costs)
        print(json.dumps(costs, indent=2))
        print(f"wrote {path}")
        return
    port = free_port()
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(
            Path(data_dir), {"schema.registry.listeners": f"http://127.0.0.1:{port}"}
        ) as broker,
    ):
        wait_ready(port)
        validating = broker.create_topic("validating", confluent_value_schema_validation=True)
        plain = broker.create_topic("plain")
        registered = request(
            http.client.HTTPConnection("127.0.0.1", port, timeout=60),
            "POST",
            f"/subjects/{validating}-value/versions",
            {"schema": json.dumps(SCHEMA)},
        )
        assert isinstance(registered, dict)
        schema_id = registered["id"]
        value = b"\0" + schema_id.to_bytes(4, "big") + b"x" * args.value_size
        values = [value] * args.records
        rates: dict[str, list[float]] = {plain: [], validating: []}
        for _ in range(args.rounds):
            for topic in (plain, validating):
                rates[topic].append(round(produce(broker.bootstrap, topic, values)))
    results = {
        "plain_records_per_s": rates[plain],
        "validating_records_per_s": rates[validating],
        "check_alone": check_cost(value, schema_id),
    }
    path = write_result("schema_validation", args, results)
    print(json.dumps(results, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
