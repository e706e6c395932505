"""Classic vs KIP-848 consumer groups: how fast a group gets going and recovers.

1. A lone member: seconds from subscribe() to its first record, with
   ``group.protocol=classic`` and ``group.protocol=consumer`` (fresh group per run).
2. A 3-member group (6 partitions) where one member is killed with SIGKILL: seconds from
   the kill until the two survivors own every partition. Both protocols use a 10 s session
   timeout (classic: the client's ``session.timeout.ms``; consumer: the broker's
   ``group.consumer.session.timeout.ms``), so the figure is the detection plus the
   rebalance itself.

The broker runs with Kafka's defaults otherwise (``group.initial.rebalance.delay.ms``
3000, ``group.consumer.heartbeat.interval.ms`` 5000). Results go to
benchmarks/results/group_protocols.json; nothing is asserted.

    python -m benchmarks.group_protocols [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer

from benchmarks.harness import RESULTS, create_topic, seconds_to_first_record
from moldau.testing import BrokerProcess

PROTOCOLS = ("classic", "consumer")
SESSION_TIMEOUT_MS = 10_000
PARTITIONS = 6
TIMEOUT_S = 120.0


def client_config(bootstrap: str, group: str, protocol: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        config["session.timeout.ms"] = SESSION_TIMEOUT_MS
    return config


def first_record(bootstrap: str, topic: str, protocol: str) -> float:
    config = client_config(bootstrap, f"first-{uuid.uuid4().hex[:8]}", protocol)
    return seconds_to_first_record(config, topic, TIMEOUT_S)


class Member:
    """A member in a subprocess (``python -m benchmarks.group_protocols member ...``) that
    prints its partitions whenever they change."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.group_protocols", "member", bootstrap, topic, group,
             protocol],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        self.owned: frozenset[int] = frozenset()
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.owned = frozenset(json.loads(line))
                self.changed.notify_all()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def wait_for(members: list[Member], condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        with members[0].changed:
            members[0].changed.wait(0.01)


def covered(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    return sum(len(o) for o in owned) == PARTITIONS and frozenset().union(*owned) == frozenset(
        range(PARTITIONS)
    )


def rebalance_after_kill(bootstrap: str, topic: str, protocol: str) -> float:
    group = f"kill-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, topic, group, protocol) for _ in range(3)]
    try:
        wait_for(members, lambda: covered(members) and all(m.owned for m in members), "3 members")
        victim, survivors = members[0], members[1:]
        start = time.monotonic()
        victim.kill()
        wait_for(survivors, lambda: covered(survivors), "the survivors to own everything")
        return time.monotonic() - start
    finally:
        for m in members:  # each run has its own group: no need to leave it cleanly
            if m.proc.poll() is None:
                m.kill()


def run_member(bootstrap: str, topic: str, group: str, protocol: str) -> None:
    consumer = Consumer(client_config(bootstrap, group, protocol))
    consumer.subscribe([topic])
    owned: list[int] | None = None
    while True:
        consumer.poll(0.05)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != owned:
            owned = now
            print(json.dumps(now), flush=True)


def main() -> None:
    if sys.argv[1:2] == ["member"]:
        run_member(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per protocol and figure")
    args = parser.parse_args()
    overrides = {"group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    results: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(Path(data_dir), overrides) as broker,
    ):
        topic = create_topic(broker.bootstrap, "group-protocols", PARTITIONS)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for p in range(PARTITIONS):
            producer.produce(topic, b"record", partition=p)
        if producer.flush(30) != 0:
            raise RuntimeError("the records were not acknowledged")
        first_record(broker.bootstrap, topic, "classic")  # warm-up: __consumer_offsets
        for protocol in PROTOCOLS:
            first = [
                round(first_record(broker.bootstrap, topic, protocol) * 1000)
                for _ in range(args.runs)
            ]
            kill = [
                round(rebalance_after_kill(broker.bootstrap, topic, protocol) * 1000)
                for _ in range(args.runs)
            ]
            results[protocol] = {
                "first_record_median_ms": statistics.median(first),
                "first_record_runs_ms": first,
                "rebalance_after_kill_median_ms": statistics.median(kill),
                "rebalance_after_kill_runs_ms": kill,
            }
    document = {
        "benchmark": "group_protocols",
        "metric": "subscribe() to first record (lone member); SIGKILL of 1 of 3 members to "
        f"the survivors owning all {PARTITIONS} partitions (session timeout "
        f"{SESSION_TIMEOUT_MS} ms)",
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(document, indent=2)
    (RESULTS / "group_protocols.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
