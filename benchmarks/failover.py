"""Leader failover after kill -9: how long until the cluster and its clients carry on.

Each round starts a fresh 3-node cluster (``moldau.testing.cluster()``, combined
broker+controller nodes), creates an RF=3 topic of 3 partitions, and runs a confluent-kafka
producer (acks=all, one record every 20 ms) and a consumer (``assign``) on one partition.
Then it kills (kill -9) that partition's leader. Rounds alternate two cases: the leader is
also the active controller (the quorum must elect a new Raft leader first) or it is not.
Measured from the kill:

- ``elected_ms``: a surviving node's metadata names a new leader for the partition;
- ``produce_ms``: the first record produced after the kill is acknowledged;
- ``consume_ms``: the consumer receives the first record produced after the kill.

Reported per case: min / median / max, and every round's figures with the survivors' log
lines of the rounds slower than ``--slow-s`` (what the nodes did, with timestamps).
Results go to benchmarks/results/failover-*.json; nothing is asserted.

    python -m benchmarks.failover [--rounds 10] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness import write_result
from moldau.testing import cluster

TOPIC = "failover"
GIVE_UP_S = 90.0


class Traffic:
    """A producer and a consumer on one partition, in threads, timestamping what happens."""

    def __init__(self, bootstrap: str, partition: int) -> None:
        self.bootstrap, self.partition = bootstrap, partition
        self.acks: list[tuple[float, float]] = []  # (acknowledged at, produced at)
        self.received: list[tuple[float, float]] = []  # (received at, produced at)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def __enter__(self) -> Traffic:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.acks.append((time.monotonic(), float(msg.value())))
            else:
                self.errors.append(str(err))

        while not self._stop.is_set():
            sent = repr(time.monotonic()).encode()
            producer.produce(TOPIC, sent, partition=self.partition, on_delivery=delivered)
            producer.poll(0.02)
        producer.flush(10)

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "failover-bench",  # never joined: assign()
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([TopicPartition(TOPIC, self.partition, 0)])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(100, timeout=0.05):
                    if msg.error() is None:
                        self.received.append((time.monotonic(), float(msg.value())))
        finally:
            consumer.close()

    def first_ack_after(self, t: float) -> float | None:
        """When the first record produced after ``t`` was acknowledged."""
        return next((a for a, sent in list(self.acks) if sent > t), None)

    def first_record_produced_after(self, t: float) -> float | None:
        return next((r for r, sent in list(self.received) if sent > t), None)


def one_round(kill_controller: bool, slow_s: float) -> dict[str, Any]:
    with cluster(nodes=3) as c:
        c.create_topic(TOPIC, 3, replication_factor=3, timeout=60)
        controller = c.wait_until(c.controller, 30)
        leaders = {p: c.leader(TOPIC, p) for p in range(3)}
        chosen = [p for p, n in leaders.items() if (n == controller) == kill_controller]
        if not chosen:  # the leaders happen to be placed all on or all off the controller
            return {"skipped": f"controller {controller}, leaders {leaders}"}
        partition = chosen[0]
        victim = leaders[partition]
        with Traffic(c.bootstrap_servers, partition) as traffic:
            c.wait_until(lambda: traffic.received, 30)  # both clients are going
            marks = {i: n.lines_seen for i, n in c.nodes.items()}
            c.kill(victim)  # returns once the process is gone
            killed_at = time.monotonic()
            killed_wall = time.time()
            elected = None
            deadline = killed_at + GIVE_UP_S
            while time.monotonic() < deadline:
                try:
                    leader = c.leader(TOPIC, partition)
                except (ConnectionError, TimeoutError, OSError, KeyError):
                    leader = -1
                if elected is None and leader not in (-1, victim):
                    elected = time.monotonic()
                done = traffic.first_ack_after(killed_at) and traffic.first_record_produced_after(
                    killed_at
                )
                if elected is not None and done:
                    break
                time.sleep(0.05)
            acked = traffic.first_ack_after(killed_at)
            consumed = traffic.first_record_produced_after(killed_at)

        def ms(t: float | None) -> float | None:
            return None if t is None else round((t - killed_at) * 1000)

        result: dict[str, Any] = {
            "killed": victim,
            "controller": controller,
            "partition": partition,
            "killed_at_utc": time.strftime("%H:%M:%S", time.gmtime(killed_wall))
            + f".{int(killed_wall * 1000) % 1000:03d}",
            "elected_ms": ms(elected),
            "produce_ms": ms(acked),
            "consume_ms": ms(consumed),
            "producer_errors": traffic.errors[:3],
        }
        slowest = max((v or GIVE_UP_S * 1000) for k, v in result.items() if k.endswith("_ms"))
        if slowest > slow_s * 1000:
            for i, n in c.nodes.items():
                if i != victim:
                    n.settle_output()
                    result[f"log_node{i}"] = n.output_since(marks[i])[-200:]
        return result


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": len(rounds)}
    for key in ("elected_ms", "produce_ms", "consume_ms"):
        values = [r[key] for r in rounds]
        done = sorted(v for v in values if v is not None)
        out[key] = {
            "min": done[0] if done else None,
            "median": statistics.median(done) if done else None,
            "max": done[-1] if done else None,
            "never": len(values) - len(done),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    parser.add_argument("--slow-s", type=float, default=15.0, help="keep logs of slower rounds")
    parser.add_argument("--label", default="", help="added to the result file's name")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    results: dict[str, list[dict[str, Any]]] = {"controller": [], "not_controller": []}
    for i in range(rounds):
        case = "controller" if i % 2 == 0 else "not_controller"
        r = one_round(case == "controller", args.slow_s)
        if "skipped" not in r:
            results[case].append(r)
        print(case, {k: v for k, v in r.items() if not k.startswith("log_")}, flush=True)
    document = {case: {"summary": summary(rs), "rounds": rs} for case, rs in results.items() if rs}
    for case, doc in document.items():
        print(case, doc["summary"])
    name = "failover" + (f"-{args.label}" if args.label else "")
    print(write_result(name, args, document))


if __name__ == "__main__":
    main()
