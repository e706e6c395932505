"""Spread produce against one partition, like for like (issue 23's 10,000-partition goal).

For each size (default 1,000 and 10,000 partitions, topics of 10 partitions, as in
``benchmarks.scale``) a fresh broker is started, the topics are created and every log is
made by one raw record per partition (not measured: the first produce creates the files;
``benchmarks.scale`` measures that), and the broker is left to settle (its CPU under 5%:
the new files' fsyncs are done). Then, alternately, the same confluent-kafka producer
load (same settings, records of ``--size`` bytes, ``--rounds`` records per partition):

- spread: record i goes to partition i mod N, so each request carries every partition
  with a batch of about ``rounds`` records (librdkafka batches per partition),
- one partition: the same number of records, all to partition 0 of the first topic,
- raw: ProduceRequests of 1,000 partitions with one record each (the broker alone).

Each phase reports records/s and the broker's CPU (user + system, from ``/proc``) per
record, with the load average; the machine is shared, so CPU per record is the figure to
compare. ``--profile`` records a py-spy flame graph of the broker during the spread phase
into ``benchmarks/results/``. Results go to ``benchmarks/results/spread_produce-*.json``.

    python -m benchmarks.spread_produce [--sizes 1000,10000] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from benchmarks.harness import RESULTS, write_result
from benchmarks.scale import PARTITIONS_PER_TOPIC, cpu_seconds, create_topics, raw_produce, started

PRODUCER = {
    "linger.ms": 20,
    "queue.buffering.max.messages": 1_000_000,
    "topic.metadata.refresh.interval.ms": 600_000,
}


def client_produce(bootstrap: str, targets: list[tuple[str, int]], value: bytes) -> float:
    """Every (topic, partition) of ``targets`` gets one record, in order; records/s until
    all are acknowledged (a failed delivery raises)."""
    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        failed += err is not None

    producer = Producer({"bootstrap.servers": bootstrap, "on_delivery": on_delivery, **PRODUCER})
    producer.list_topics(timeout=120)  # metadata first: measure produce, not discovery
    start = time.monotonic()
    for i, (topic, partition) in enumerate(targets):
        producer.produce(topic, value, partition=partition)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(900)
    elapsed = time.monotonic() - start
    if remaining or failed:
        raise RuntimeError(f"{remaining} records unacknowledged, {failed} failed")
    return len(targets) / elapsed


def measured(broker: Any, records: int, run: Any) -> dict[str, float]:
    """Run one phase; records/s, broker CPU µs per record and the load average."""
    cpu = cpu_seconds(broker)
    rate = run()
    cpu = cpu_seconds(broker) - cpu
    return {
        "records_per_s": round(rate),
        "broker_cpu_us_per_record": round(1e6 * cpu / records, 1),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def settle(broker: Any, limit_s: float = 600) -> float:
    """Wait until the broker's CPU over 2 s is under 5% of a core (the fsyncs of the new
    logs' ``partition.metadata`` and other creation work are done); returns the wait."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        cpu = cpu_seconds(broker)
        time.sleep(2)
        if cpu_seconds(broker) - cpu < 0.1:
            break
    return round(time.monotonic() - start, 1)


def profiled(pid: int, path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["py-spy", "record", "-p", str(pid), "-r", "50", "-o", str(path), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure_size(args: argparse.Namespace, partitions: int, overrides: dict[str, str]) -> dict:
    names = [f"spread-{i:05d}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    every = [(n, p) for n in names for p in range(PARTITIONS_PER_TOPIC)]
    spread = every * args.rounds
    one = [(names[0], 0)] * len(spread)
    value = b"x" * args.size
    out: dict[str, Any] = {"partitions": len(every), "records": len(spread), "runs": []}
    with (
        tempfile.TemporaryDirectory(prefix="moldau-spread-") as tmp,
        started(Path(tmp), overrides) as broker,
    ):
        create_topics(broker.bootstrap, names)
        raw_produce(broker.bootstrap, names)  # every log exists from here on
        out["settle_s"] = settle(broker)
        for run in range(args.repeat):
            phases = {
                "spread": (len(spread), lambda: client_produce(broker.bootstrap, spread, value)),
                "one_partition": (len(one), lambda: client_produce(broker.bootstrap, one, value)),
                "raw_1000_partitions_a_request": (
                    len(every),
                    lambda: raw_produce(broker.bootstrap, names),
                ),
            }
            figures: dict[str, Any] = {}
            for phase, (records, produce) in phases.items():
                if phase.split("_")[0] not in args.phases:
                    continue
                spy = None
                if args.profile == phase.split("_")[0] and run == 0:
                    svg = RESULTS / f"spread_produce-{args.label}-{len(every)}-{phase}-flame.svg"
                    spy = profiled(broker.proc.pid, svg)
                figures[phase] = measured(broker, records, produce)
                if spy is not None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its graph on SIGINT
                    spy.wait(60)
            if "spread" in figures and "one_partition" in figures:
                figures["spread_to_one_partition"] = round(
                    figures["spread"]["records_per_s"] / figures["one_partition"]["records_per_s"],
                    3,
                )
            out["runs"].append(figures)
            print(len(every), out["runs"][-1], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="partition counts")
    parser.add_argument("--rounds", type=int, default=3, help="records per partition (spread)")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--repeat", type=int, default=2, help="runs of the three phases")
    parser.add_argument(
        "--phases", default="spread,one,raw", help="which of spread, one, raw to run"
    )
    parser.add_argument(
        "--profile", choices=("spread", "one", "raw"), help="py-spy flame graph of run 1's phase"
    )
    parser.add_argument("--label", default="run", help="names the flame graphs")
    parser.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    overrides = {
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.num.partitions": "50",
        **dict(pair.split("=", 1) for pair in args.broker_override),
    }
    results = {
        "sizes": [measure_size(args, int(s), overrides) for s in args.sizes.split(",")],
        "producer": PRODUCER,
    }
    print(write_result(f"spread_produce-{args.label}", args, results))


if __name__ == "__main__":
    main()
