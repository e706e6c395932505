"""Controlled shutdown (SIGTERM): a node's partition leaderships and, for the active
controller, the quorum's leadership move before it exits; a whole cluster stops cleanly at
once; a node left without a quorum still stops."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster

SESSION_TIMEOUT_MS = 6_000  # broker.session.timeout.ms: fencing would take this long


def leaders(cluster: ClusterProcess, topic: str) -> dict[int, int]:
    return {p["partition"]: p["leader"] for p in cluster.describe()["topics"][topic]}


def moved_from(cluster: ClusterProcess, topic: str, node: int) -> list[dict[str, Any]]:
    """The topic's partitions once none is led by ``node`` or leaderless, else []."""
    partitions = cluster.describe()["topics"][topic]
    return partitions if all(p["leader"] not in (node, -1) for p in partitions) else []


class BackgroundProducer:
    """acks=all, one record at a time in a thread; keeps what was acknowledged and every
    delivery error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 1000}
        )
        self.topic = topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(60)
        assert self.producer.flush(60) == 0
        del self.producer  # its connections go now, not at garbage collection

    def _run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            value = f"r{i}".encode()
            self.producer.produce(self.topic, value, on_delivery=self._delivered)
            self.producer.poll(0.01)
            i += 1

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_sigterm_moves_leaderships_before_the_node_exits(
    new_cluster: NewCluster, topic: str
) -> None:
    cluster = new_cluster(broker_session_timeout_ms=SESSION_TIMEOUT_MS)
    cluster.create_topic(topic, partitions=6)
    before = leaders(cluster, topic)
    victim = before[0]
    led = sorted(p for p, leader in before.items() if leader == victim)
    assert led, "placement gives every node leaderships"
    with BackgroundProducer(cluster.bootstrap_servers, topic) as producer:
        time.sleep(0.5)
        started = time.monotonic()
        assert cluster.stop(victim) == 0
        # Committed before the exit; the others see it once the quorum's high watermark
        # reaches them (a new quorum leader first, if the victim led it).
        after = cluster.wait_until(lambda: moved_from(cluster, topic, victim))
        moved_in = time.monotonic() - started
        time.sleep(0.5)
    node = cluster.node(victim)
    assert any("shut down cleanly" in line for line in node.output)
    assert not any("controlled shutdown timed out" in line for line in node.output)
    assert moved_in < SESSION_TIMEOUT_MS / 1000, "moved without waiting to be fenced"
    for p in after:
        assert victim not in p["isr"], p
    assert producer.errors == []
    assert producer.acked, "the producer kept going"
    consumed = cluster.consume(topic, len(producer.acked))
    assert {(r.partition, r.offset, r.value) for r in consumed} >= set(producer.acked)


def test_sigterm_of_the_active_controller_hands_the_quorum_over(new_cluster: NewCluster) -> None:
    """The leader resigns (EndQuorumEpoch): the others elect a successor at once instead of
    after controller.quorum.fetch.timeout.ms (set long here to tell the two apart)."""
    cluster = new_cluster(controller_quorum_fetch_timeout_ms=10_000)
    before = cluster.describe()["quorum"]
    controller = before["leader"]
    cluster.stop(controller)
    exited = time.monotonic()
    quorum = cluster.wait_until(
        lambda: (q := cluster.describe()["quorum"]).get("leader", -1) not in (-1, controller) and q,
        timeout=30,
    )
    assert quorum["epoch"] > before["epoch"]
    assert time.monotonic() - exited < 5, "a successor without waiting for the fetch timeout"
    cluster.create_topic("after-handover", replication_factor=2)  # the new controller decides


def test_a_whole_cluster_stops_cleanly_at_once(new_cluster: NewCluster, topic: str) -> None:
    cluster = new_cluster(broker_session_timeout_ms=SESSION_TIMEOUT_MS)
    cluster.create_topic(topic, partitions=3)
    cluster.produce(topic, *[f"v{i}" for i in range(30)])
    started = time.monotonic()
    procs = {i: n.proc for i, n in cluster.nodes.items()}
    cluster.close()
    assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000
    for i, node in cluster.nodes.items():
        proc = procs[i]
        assert proc is not None and proc.returncode == 0, (i, list(node.output)[-20:])
        assert any("shut down cleanly" in line for line in node.output), i


def test_a_node_left_without_a_quorum_still_stops(new_cluster: NewCluster) -> None:
    """Nothing can move its leaderships: it stops once no controller answered for a
    session timeout instead of waiting out the controlled-shutdown timeout."""
    cluster = new_cluster(broker_session_timeout_ms=3_000)
    cluster.create_topic("t", partitions=3)
    last, *others = sorted(cluster.nodes)
    for i in others:
        cluster.kill(i)
    started = time.monotonic()
    assert cluster.stop(last) == 0
    assert time.monotonic() - started < 20
    assert any("no controller answered" in line for line in cluster.node(last).output)
