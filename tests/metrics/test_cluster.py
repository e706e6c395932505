"""A three-node KRaft cluster with metrics, scraped on every node: the sums over nodes
match the workload, exactly one node reports the active controller, followers count what
they replicate, a killed follower shows up as ISR shrinks and under-replicated partitions
and its return as ISR expansions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from moldau.console.metrics import Scrape
from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.metrics.helpers import Samples, fetch_text

TOPIC, PARTITIONS, RECORDS = "replicated", 3, 300
COMMITS = {0: 10, 1: 20, 2: 30}
OFFSETS_PARTITIONS = 3
RM = "kafka_server_replicamanager_"
CONTROLLER = "kafka_controller_kafkacontroller_"
ACTIVE = CONTROLLER + "activecontrollercount"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    configs = {
        **TEST_DEFAULTS,
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "replica.lag.time.max.ms": "3000",
    }
    with ClusterProcess(
        3, configs=configs, data_dir=tmp_path_factory.mktemp("cluster"), metrics=True
    ) as running:
        yield running


def scrape(cluster: ClusterProcess, ids: list[int] | None = None) -> list[Samples]:
    return [Samples.scrape(cluster.metrics_url(i)) for i in ids or sorted(cluster.nodes)]


def total(samples: list[Samples], name: str, **labels: str) -> float:
    return sum(s.values.get((name, frozenset(labels.items())), 0.0) for s in samples)


def _processes_using(data_dir: Path) -> list[int]:
    """Processes whose command line names ``data_dir`` (nodes started with it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(data_dir).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # exited meanwhile
            continue
    return found


def group_lags(samples: list[Samples]) -> list[dict[int, float]]:
    """The lag of the workload's group per partition, as each node reports it."""
    series = ("kafka_consumergroup_lag", "consumergroup", "topic", "partition")
    return [
        {int(p): v for (g, t, p), v in s.series(*series).items() if g == "cluster-readers"}
        for s in samples
    ]


@pytest.fixture(scope="module")
def workload(cluster: ClusterProcess) -> dict[int, int]:
    """Replicated records produced with acks=all; a group commits known offsets. Returns
    the lag per partition this leaves."""
    cluster.create_topic(TOPIC, PARTITIONS, replication_factor=3)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    for i in range(RECORDS):
        producer.produce(TOPIC, b"x" * 50, b"%06d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "cluster-readers",
            "enable.auto.commit": False,
        }
    )
    offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITS.items()]

    def committed() -> bool:
        try:  # the offsets topic and its coordinators may still be coming up
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return False
        return True

    try:
        cluster.wait_until(committed, timeout=60, interval=0.5)
    finally:
        consumer.close()
    return {p: RECORDS // PARTITIONS - o for p, o in COMMITS.items()}


def test_cluster_wide_sums_match_the_workload(cluster: ClusterProcess, workload: dict[int, int]):
    partitions = PARTITIONS + OFFSETS_PARTITIONS
    cluster.wait_until(
        lambda: (
            (s := scrape(cluster))
            and total(s, RM + "underreplicatedpartitions") == 0
            and total(s, RM + "partitioncount") == 3 * partitions
            # A follower learns its leader's new HW with its next fetch response.
            and [lag for lag in group_lags(s) if lag] == [workload]
        ),
        timeout=60,
    )
    samples = scrape(cluster)
    assert total(samples, ACTIVE) == 1
    active = next(i for i, s in zip(sorted(cluster.nodes), samples, strict=True) if s.value(ACTIVE))
    assert active == cluster.controller()
    assert {s.value("kafka_server_raft_metrics_current_leader") for s in samples} == {active}

    assert total(samples, RM + "leadercount") == partitions
    # Only the active controller reports the cluster's partitions.
    assert total(samples, CONTROLLER + "globalpartitioncount") == partitions
    assert total(samples, CONTROLLER + "offlinepartitionscount") == 0
    assert total(samples, CONTROLLER + "activebrokercount") == 3
    assert total(samples, CONTROLLER + "fencedbrokercount") == 0
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert total(samples, messages, topic=TOPIC) == RECORDS
    bytes_in = total(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert bytes_in > RECORDS * 50
    # Both followers of every partition appended what its leader did (and the offsets
    # topic's records too).
    for direction in ("in", "out"):
        name = f"kafka_server_brokertopicmetrics_replicationbytes{direction}_total"
        assert total(samples, name) >= 2 * bytes_in
    assert sum(s.requests("FetchFollower") for s in samples) > 0
    # The controller listeners' requests are counted too.
    assert sum(s.requests("BrokerHeartbeat") for s in samples) > 0

    # The group's coordinator (one node) reports its lag; it hosts every partition here,
    # so it knows each one. The console's reading of the three endpoints agrees.
    assert [lag for lag in group_lags(samples) if lag] == [workload]
    merged = Scrape.parse(fetch_text(cluster.metrics_url(i)) for i in sorted(cluster.nodes))
    assert merged.group_lag()["cluster-readers"] == {TOPIC: sum(workload.values())}


def test_a_lost_follower_shrinks_the_isr_and_its_return_expands_it(
    cluster: ClusterProcess, workload: dict[int, int]
):
    active = cluster.controller()
    victim = next(i for i in sorted(cluster.nodes) if i != active)
    others = [i for i in sorted(cluster.nodes) if i != victim]
    before = scrape(cluster, others)
    shrinks_before = total(before, RM + "isrshrinks_total")
    cluster.kill(victim)
    cluster.wait_until(
        lambda: (
            (s := scrape(cluster, others))
            and total(s, RM + "underreplicatedpartitions") > 0
            and total(s, RM + "isrshrinks_total") > shrinks_before
        ),
        timeout=60,
    )
    # The active controller fences the silent broker after its session timeout.
    cluster.wait_until(
        lambda: (
            (s := scrape(cluster, others))
            and total(s, CONTROLLER + "fencedbrokercount") == 1
            and total(s, CONTROLLER + "activebrokercount") == 2
        ),
        timeout=60,
    )
    assert total(scrape(cluster, others), CONTROLLER + "offlinepartitionscount") == 0
    expands_before = total(scrape(cluster, others), RM + "isrexpands_total")

    cluster.start_node(victim)
    cluster.wait_until(
        lambda: (
            (s := scrape(cluster))
            and total(s, RM + "underreplicatedpartitions") == 0
            and total(s, RM + "partitioncount") == 3 * (PARTITIONS + OFFSETS_PARTITIONS)
        ),
        timeout=90,
    )
    assert total(scrape(cluster, others), RM + "isrexpands_total") > expands_before


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_cluster_up_serves_and_prints_the_metrics_urls(tmp_path: Path, stop_signal: int):
    """`moldau cluster up` serves metrics and stops its nodes cleanly on Ctrl-C or SIGTERM
    (a node left running would keep its ports and data dir)."""
    up = subprocess.Popen(
        [sys.executable, "-m", "moldau", "cluster", "up", "--nodes", "1", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert up.stdout is not None
        urls = []
        for line in up.stdout:  # the URLs come before "press Ctrl-C to stop"
            if line.startswith("metrics: "):
                urls.append(line.split()[1])
            if "Ctrl-C" in line:
                break
        assert len(urls) == 1

        def agreed() -> bool:  # the nodes' collectors serve once each node has started
            samples = [Samples.scrape(url) for url in urls]
            leaders = {
                s.values.get(("kafka_server_raft_metrics_current_leader", frozenset()))
                for s in samples
            }
            return leaders == {1.0} and total(samples, ACTIVE) == 1

        ClusterProcess.wait_until(agreed, timeout=60)
    finally:
        up.send_signal(stop_signal)
        try:  # longer than `up` waits for its nodes before it kills them
            rest, _ = up.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            up.kill()
            rest, _ = up.communicate()
    assert up.returncode == 0, rest
    assert "stopping" in rest
    node_data = tmp_path / "node1"
    assert not _processes_using(node_data), "a node outlived `moldau cluster up`"
