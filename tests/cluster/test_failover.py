"""Failures of whole nodes: kill -9 of the active controller while topics are being created,
and a broker that stops heartbeating (SIGSTOP) is fenced, then gets its leaderships back."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster

ELECTION_LIMIT_S = 8.0  # Kafka's defaults: fetch timeout 2 s, election timeout 1-2 s
CATCH_UP_LIMIT_S = 10.0  # a follower's image trails a commit by a fetch round trip


class TopicCreator:
    """Creates topics ``<prefix>-0``, ``-1``... one at a time in a thread, as a user would;
    keeps the names whose CreateTopics succeeded and when."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.prefix = prefix
        self.created: list[tuple[str, float]] = []
        self.failed: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TopicCreator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(120)
        del self.admin  # librdkafka's handle goes now, not with the test's frame

    def _run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            name = f"{self.prefix}-{i}"
            i += 1
            future = self.admin.create_topics(
                [NewTopic(name, 2, replication_factor=2)], operation_timeout=30
            )[name]
            try:
                future.result(60)
                self.created.append((name, time.monotonic()))
            except Exception as e:  # the request died with the controller: may or may not exist
                self.failed.append((name, str(e)))

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.created) < count:
            assert time.monotonic() < deadline, f"only {len(self.created)} topics created"
            time.sleep(0.02)


def topics_on(cluster: ClusterProcess, node: int) -> set[str]:
    return set(cluster.describe(node)["topics"])


def test_kill_9_of_the_active_controller_while_topics_are_created(
    new_cluster: NewCluster,
) -> None:
    cluster = new_cluster()
    old = cluster.controller()
    assert old is not None
    old_epoch = cluster.describe()["quorum"]["epoch"]
    with TopicCreator(cluster.bootstrap_servers, "created") as creator:
        creator.wait_for(15)
        cluster.kill(old)
        killed_at = time.monotonic()
        new = cluster.wait_until(
            lambda: (c := cluster.controller()) not in (None, old) and c, ELECTION_LIMIT_S
        )
        elected_in = time.monotonic() - killed_at
        before_kill = len([t for t in creator.created if t[1] < killed_at])
        creator.wait_for(before_kill + 15)
    first_after = min(t for _, t in creator.created if t > killed_at)
    print(
        f"controller {old} killed: node {new} elected in {elected_in:.2f} s, topics created "
        f"again {first_after - killed_at:.2f} s after the kill; {len(creator.created)} created, "
        f"{len(creator.failed)} failed"
    )
    assert cluster.describe()["quorum"]["epoch"] > old_epoch
    created = {name for name, _ in creator.created}
    for node in cluster.running():
        # A CreateTopics is answered once the topic is committed, which a follower learns
        # from its next fetch response: its image may trail the answer by that round trip.
        # A lost topic never shows up.
        try:
            cluster.wait_until(lambda n=node: created <= topics_on(cluster, n), CATCH_UP_LIMIT_S)
        except AssertionError:
            missing = created - topics_on(cluster, node)
            raise AssertionError(f"node {node} lost committed topics {sorted(missing)}") from None
    cluster.start_node(old)
    cluster.wait_until(lambda: created <= topics_on(cluster, old), 30)
    for name in sorted(created)[:3]:  # each committed topic is a usable topic
        cluster.produce(name, name)
        assert [r.value for r in cluster.consume(name, 1)] == [name.encode()]


def test_a_paused_broker_is_fenced_and_gets_its_leaderships_back(
    new_cluster: NewCluster, topic: str
) -> None:
    """SIGSTOP: no heartbeats, so after broker.session.timeout.ms the controller fences it
    and its partitions get other leaders; once it is back and in the ISR again, the
    automatic leader balancer gives the preferred replica its leadership back (WE-24)."""
    cluster = new_cluster(
        broker_session_timeout_ms=3_000,
        broker_heartbeat_interval_ms=500,
        leader_imbalance_check_interval_seconds=1,
        replica_lag_time_max_ms=2_000,
    )
    cluster.create_topic(topic, partitions=6)
    preferred = {p["partition"]: p["replicas"][0] for p in cluster.describe()["topics"][topic]}
    victim = next(n for n in cluster.nodes if n != cluster.controller())
    led = {p for p, r in preferred.items() if r == victim}
    assert led and all(cluster.leader(topic, p) == victim for p in led)
    cluster.produce(topic, *[f"before-{i}" for i in range(60)])

    cluster.pause(victim)
    paused_at = time.monotonic()
    fenced = cluster.wait_until(
        lambda: any(b["id"] == victim and b["fenced"] for b in cluster.describe()["brokers"]), 20
    )
    assert fenced
    fenced_in = time.monotonic() - paused_at
    parts = {p["partition"]: p for p in cluster.describe()["topics"][topic]}
    for p in parts.values():
        assert p["leader"] not in (victim, -1), p
        assert victim not in p["isr"] and victim in p["offline"], p
    assert fenced_in >= 2.5, "fenced only after the session timeout"
    acked = cluster.produce(topic, *[f"while-paused-{i}" for i in range(60)])
    assert {r.partition for r in acked} == set(preferred), "every partition takes writes"

    cluster.resume(victim)
    cluster.wait_until(
        lambda: all(cluster.leader(topic, p) == victim for p in led), 30
    )  # back in the ISR, then the balancer's preferred election
    parts = {p["partition"]: p for p in cluster.describe()["topics"][topic]}
    assert all(victim in p["isr"] and not p["offline"] for p in parts.values()), parts
    print(f"fenced {fenced_in:.2f} s after SIGSTOP; leaderships back after SIGCONT")
    consumed = cluster.consume(topic, 120)
    assert sorted(r.value for r in consumed) == sorted(
        [f"before-{i}".encode() for i in range(60)]
        + [f"while-paused-{i}".encode() for i in range(60)]
    )


def test_kill_9_of_the_controller_fences_it_one_session_after_its_death(
    new_cluster: NewCluster, topic: str
) -> None:
    """The active controller leads a partition and is killed: its partitions get new leaders
    one broker session after the kill, as a plain broker's do. The new controller does not
    give its silent predecessor a fresh session on top of the quorum's fetch timeout and
    election (that made this case take fetch timeout + election + session)."""
    session_s = fetch_timeout_s = 6
    cluster = new_cluster(
        broker_session_timeout_ms=session_s * 1000,
        controller_quorum_fetch_timeout_ms=fetch_timeout_s * 1000,
    )
    cluster.create_topic(topic, partitions=3)
    old = cluster.controller()
    partition = next(p for p in range(3) if cluster.leader(topic, p) == old)
    acked = cluster.produce(topic, *[f"before-{i}" for i in range(30)])

    cluster.kill(old)
    killed_at = time.monotonic()
    cluster.wait_until(lambda: cluster.leader(topic, partition) not in (-1, old), 60)
    elected_in = time.monotonic() - killed_at
    print(f"controller {old} killed: its partition has a new leader after {elected_in:.2f} s")
    # session + the controller's 1 s check + slack; before: >= fetch timeout + session
    assert elected_in < session_s + 4, f"new leader after {elected_in:.1f} s"
    acked += cluster.produce(topic, *[f"after-{i}" for i in range(30)])
    consumed = cluster.consume(topic, len(acked))
    assert sorted(r.value for r in consumed) == sorted(r.value for r in acked)
