"""Spread produce against one partition, like for like (issue 23's 10,000-partition goal).

For each size (default 1,000 and 10,000 partitions, topics of 10 partitions, as in
``benchmarks.scale``) a fresh broker is started, the topics are created and every log is
made by one raw record per partition (not measured: the first produce creates the files;
``benchmarks.scale`` measures that), and the broker is left to settle (its CPU under 5%:
the new files' fsyncs are done); its idle CPU with every log open is recorded. Then, in
turn, the phases of ``--phases`` (same load each, records of ``--size`` bytes, ``--rounds``
records per partition):

- spread: confluent-kafka (librdkafka, in this process) sends record i to partition
  i mod N, so each request carries every partition with a batch of about ``rounds``
  records (librdkafka batches per partition),
- one: the same number of records, all to partition 0 of the first topic,
- java-spread, java-one: the same two loads from the Kafka Java producer 3.9.0
  (``benchmarks/java/SpreadProducer.java``, compiled at run time against the jars the
  Java tests use; its defaults, with the same ``linger.ms``; a warm-up of the same load
  first, so the JIT is not timed),
- raw: ProduceRequests of 1,000 partitions with one record each (the broker alone).

Each phase reports records/s and the CPU (user + system, from ``/proc``) per record of
the broker and of the client process, with the load average; the machine is shared, so
CPU per record is the figure to compare. ``--profile PHASE`` records a py-spy flame
graph of the broker during that phase of the first run into ``benchmarks/results/``.
Results go to ``benchmarks/results/spread_produce-*.json``.

    python -m benchmarks.spread_produce [--sizes 1000,10000] [--rounds 3]
        [--phases spread,one,java-spread,java-one,raw] [--profile raw]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from benchmarks.harness import RESULTS, write_result
from benchmarks.scale import (
    PARTITIONS_PER_TOPIC,
    cpu_seconds,
    create_topics,
    proc_cpu_seconds,
    raw_produce,
    started,
)
from tests.java.jars import cache_dir, fetch_jars, find_javac, java_command

PRODUCER = {
    "linger.ms": 20,
    "queue.buffering.max.messages": 1_000_000,
    "topic.metadata.refresh.interval.ms": 600_000,
}
# The Java client's defaults otherwise (acks=all, idempotence on, batch.size 16 KiB).
JAVA_PRODUCER = {"linger.ms": 20, "buffer.memory": 256 << 20, "max.block.ms": 600_000}
JAVA_MAIN = "SpreadProducer"
IDLE_S = 20
# Phase key in the results -> its name in --phases / --profile.
PHASE_NAMES = {
    "spread": "spread",
    "one_partition": "one",
    "java_spread": "java-spread",
    "java_one_partition": "java-one",
    "raw_1000_partitions_a_request": "raw",
}


Window = Callable[[], AbstractContextManager[dict[str, float]]]


def window_of(broker: Any, client_pid: int) -> Window:
    """A timed window: wall seconds and the broker's and the client's CPU seconds in it."""

    @contextmanager
    def window() -> Iterator[dict[str, float]]:
        out: dict[str, float] = {}
        broker_cpu, client_cpu = cpu_seconds(broker), proc_cpu_seconds(client_pid)
        start = time.monotonic()
        yield out
        out["seconds"] = time.monotonic() - start
        out["broker_cpu_s"] = cpu_seconds(broker) - broker_cpu
        out["client_cpu_s"] = proc_cpu_seconds(client_pid) - client_cpu

    return window


def client_produce(broker: Any, targets: list[tuple[str, int]], value: bytes) -> dict[str, float]:
    """librdkafka (confluent-kafka, in this process): every (topic, partition) of
    ``targets`` gets one record, in order, timed until all are acknowledged (a failed
    delivery raises)."""
    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        failed += err is not None

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "on_delivery": on_delivery, **PRODUCER}
    )
    producer.list_topics(timeout=120)  # metadata first: measure produce, not discovery
    with window_of(broker, os.getpid())() as timed:
        for i, (topic, partition) in enumerate(targets):
            producer.produce(topic, value, partition=partition)
            if i % 1000 == 0:
                producer.poll(0)
        remaining = producer.flush(900)
    if remaining or failed:
        raise RuntimeError(f"{remaining} records unacknowledged, {failed} failed")
    return timed


def java_program() -> list[str]:
    """``java -cp ... SpreadProducer``, compiled once per source into the Java tests'
    cache (the Kafka Java client 3.9.0 jars ``tests/java/jars.py`` fetches)."""
    javac = find_javac()
    if javac is None:
        raise SystemExit("--java needs a JDK (javac)")
    jars = [str(p) for p in fetch_jars()]
    source = Path(__file__).parent / "java" / f"{JAVA_MAIN}.java"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = cache_dir() / "benchmarks" / digest
    if not (classes / f"{JAVA_MAIN}.class").is_file():
        subprocess.run(
            [javac, "-d", str(classes), "-cp", os.pathsep.join(jars), str(source)], check=True
        )
    classpath = os.pathsep.join([str(classes), *jars])
    return [java_command(javac), "-Xmx512m", "-cp", classpath, JAVA_MAIN]


def java_produce(
    broker: Any, names: list[str], records: int, spread: bool, value_size: int
) -> dict[str, float]:
    """The Java producer (its defaults, ``linger.ms`` as librdkafka's here): ``records``
    records spread over every partition of ``names`` or all to the first one."""
    args = [broker.bootstrap, ",".join(names), str(PARTITIONS_PER_TOPIC), str(records)]
    settings = [f"{k}={v}" for k, v in JAVA_PRODUCER.items()]
    command = [*java_program(), *args, "spread" if spread else "one", str(value_size), *settings]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as java:
        assert java.stdin is not None and java.stdout is not None
        if java.stdout.readline().strip() != "ready":
            raise RuntimeError("the Java producer did not start")
        with window_of(broker, java.pid)() as timed:
            java.stdin.write("go\n")
            java.stdin.flush()
            result = json.loads(java.stdout.readline())
        java.stdin.close()
    if result["failed"] or result["records"] != records:
        raise RuntimeError(f"Java producer: {result}")
    return timed


def raw_phase(broker: Any, names: list[str]) -> dict[str, float]:
    """Raw ProduceRequests of 1,000 one-record partitions (``benchmarks.scale``'s)."""
    with window_of(broker, os.getpid())() as timed:
        raw_produce(broker.bootstrap, names)
    return timed


def measured(records: int, run: Callable[[], dict[str, float]]) -> dict[str, float]:
    """Run one phase; records/s, broker and client CPU µs per record, the load average."""
    timed = run()
    return {
        "records_per_s": round(records / timed["seconds"]),
        "broker_cpu_us_per_record": round(1e6 * timed["broker_cpu_s"] / records, 1),
        "client_cpu_us_per_record": round(1e6 * timed["client_cpu_s"] / records, 1),
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
        idle = cpu_seconds(broker)
        time.sleep(IDLE_S)
        # The per-second work over every log (flush checks, checkpoints) goes on during the
        # phases: its share of their CPU per record is idle rate × phase time / records.
        out["idle_cpu_percent"] = round(100 * (cpu_seconds(broker) - idle) / IDLE_S, 2)
        count = len(spread)
        phases: dict[str, tuple[int, Callable[[], dict[str, float]]]] = {
            "spread": (count, lambda: client_produce(broker, spread, value)),
            "one_partition": (count, lambda: client_produce(broker, one, value)),
            "java_spread": (
                count,
                lambda: java_produce(broker, names, count, True, args.size),
            ),
            "java_one_partition": (
                count,
                lambda: java_produce(broker, names, count, False, args.size),
            ),
            "raw_1000_partitions_a_request": (len(every), lambda: raw_phase(broker, names)),
        }
        for run in range(args.repeat):
            figures: dict[str, Any] = {}
            for phase, (records, produce) in phases.items():
                short = PHASE_NAMES[phase]
                if short not in args.phases.split(","):
                    continue
                spy = None
                if args.profile == short and run == 0:
                    svg = RESULTS / f"spread_produce-{args.label}-{len(every)}-{phase}-flame.svg"
                    spy = profiled(broker.proc.pid, svg)
                figures[phase] = measured(records, produce)
                if spy is not None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its graph on SIGINT
                    spy.wait(60)
            for prefix in ("", "java_"):
                if f"{prefix}spread" in figures and f"{prefix}one_partition" in figures:
                    figures[f"{prefix}spread_to_one_partition"] = round(
                        figures[f"{prefix}spread"]["records_per_s"]
                        / figures[f"{prefix}one_partition"]["records_per_s"],
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
        "--phases",
        default="spread,one,raw",
        help=f"which of {', '.join(PHASE_NAMES.values())} to run",
    )
    parser.add_argument(
        "--profile", choices=tuple(PHASE_NAMES.values()), help="py-spy flame graph of run 1's phase"
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
        "java_producer": JAVA_PRODUCER,
    }
    print(write_result(f"spread_produce-{args.label}", args, results))


if __name__ == "__main__":
    main()
