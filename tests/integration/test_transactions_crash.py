"""Exactly once through crashes: a consume-transform-produce process (confluent-kafka, or
the Java client's) killed with -9 at random points and restarted, then every output
exactly once under read_committed."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from moldau.coordinator.group.partitioning import partition_for_group
from moldau.metadata.topics import TRANSACTION_STATE_TOPIC
from moldau.testing import BrokerProcess, ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.helpers import create_topic
from tests.integration.txn_helpers import DEADLINE_S, end_offsets, read_confluent
from tests.java.client import JavaClient, JavaProcess

PARTITIONS = 3
RECORDS = 900
KILLS = 6
ROOT = Path(__file__).resolve().parents[2]


def start_copier(bs: str, source: str, sink: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.txn_copier", bs, source, sink,
         f"{source}-group", f"{source}-copier"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def output_size(bs: str, sink: str) -> int:
    return sum(end_offsets(bs, sink, PARTITIONS, "read_uncommitted").values())


def wait_for_progress(bs: str, sink: str, copier: subprocess.Popen[bytes]) -> None:
    """Until the copier's output log grows."""
    before = output_size(bs, sink)
    deadline = time.monotonic() + 2 * DEADLINE_S
    while output_size(bs, sink) <= before:
        assert copier.poll() is None, "the copier died on its own"
        assert time.monotonic() < deadline, "the copier made no progress"
        time.sleep(0.05)


def write_input(bs: str, source: str, sink: str, cluster: ClusterProcess | None = None) -> None:
    for name in (source, sink):
        if cluster is None:
            create_topic(bs, name, PARTITIONS)
        else:
            cluster.create_topic(name, PARTITIONS, replication_factor=3, min_insync_replicas=2)
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(source, value=f"in-{i:05d}".encode(), partition=i % PARTITIONS)
        if i % 100 == 99:
            producer.flush(DEADLINE_S)
    producer.flush(DEADLINE_S)


def copied(bs: str, sink: str) -> int:
    return sum(map(len, read_confluent(bs, sink, PARTITIONS, "read_committed").values()))


def check_exactly_once(bs: str, sink: str) -> None:
    out = read_confluent(bs, sink, PARTITIONS, "read_committed")
    seen = Counter(v for values in out.values() for v in values)
    expected = Counter(f"IN-{i:05d}".encode() for i in range(RECORDS))
    assert seen == expected, f"duplicated: {+(seen - expected)}, lost: {+(expected - seen)}"
    for p, values in out.items():  # per partition: in input order
        assert values == sorted(values) and all(int(v[3:]) % PARTITIONS == p for v in values)
    # Nothing hangs: the LSO reaches the HW.
    deadline = time.monotonic() + DEADLINE_S
    while end_offsets(bs, sink, PARTITIONS, "read_committed") != end_offsets(
        bs, sink, PARTITIONS, "read_uncommitted"
    ):
        assert time.monotonic() < deadline, "a killed copier's transaction hangs"
        time.sleep(0.5)


@pytest.mark.slow
def test_copier_killed_at_random_points_writes_everything_once(tmp_path: Path, topic: str) -> None:
    rng = random.Random(1234)
    with BrokerProcess(tmp_path / "broker", {"num.partitions": str(PARTITIONS)}) as broker:
        bs = broker.bootstrap
        sink = f"{topic}-out"
        write_input(bs, topic, sink)
        for _ in range(KILLS):
            copier = start_copier(bs, topic, sink)
            try:
                # Let it get somewhere, then kill it at a random point: inside a
                # transaction, between batches, or in a commit.
                wait_for_progress(bs, sink, copier)
                time.sleep(rng.uniform(0, 0.4))
            finally:
                copier.kill()
                copier.wait()
        copier = start_copier(bs, topic, sink)
        try:
            deadline = time.monotonic() + 2 * DEADLINE_S
            while copied(bs, sink) < RECORDS:
                assert copier.poll() is None, "the copier died on its own"
                assert time.monotonic() < deadline, "the copier never finished"
                time.sleep(0.5)
        finally:
            copier.kill()
            copier.wait()
        check_exactly_once(bs, sink)


def start_java_copier(java: JavaClient, bs: str, source: str, sink: str) -> JavaProcess:
    return java.start(
        "txn-copy", "--bootstrap", bs, "--input", source, "--output", sink,
        "--group", f"{source}-group", "--transactional-id", f"{source}-copier",
        "--transform", "upper", "--timeout-ms", str(int(4 * DEADLINE_S * 1000)),
        "--config", "max.poll.records=20", "--config", f"group.instance.id={source}-copier",
        "--config", "session.timeout.ms=10000",
    )  # fmt: skip


@pytest.mark.slow
def test_java_copier_killed_at_random_points_writes_everything_once(
    tmp_path: Path, java: JavaClient, topic: str
) -> None:
    """The same with the Java client's sendOffsetsToTransaction loop (static membership,
    so each restarted copy takes the partitions over at once)."""
    rng = random.Random(4321)
    with BrokerProcess(tmp_path / "broker", {"num.partitions": str(PARTITIONS)}) as broker:
        bs = broker.bootstrap
        sink = f"{topic}-out"
        write_input(bs, topic, sink)
        for _ in range(KILLS // 2):
            copier = start_java_copier(java, bs, topic, sink)
            try:
                copier.wait_for(lambda e: e["event"] == "committed", "a committed transaction")
                time.sleep(rng.uniform(0, 0.3))
            finally:
                copier.kill()
        copier = start_java_copier(java, bs, topic, sink)
        try:
            deadline = time.monotonic() + 2 * DEADLINE_S
            while copied(bs, sink) < RECORDS:
                assert copier.proc.poll() is None, f"the copier stopped:\n{copier}"
                assert time.monotonic() < deadline, f"the copier never finished:\n{copier}"
                time.sleep(0.5)
        finally:
            copier.kill()
        check_exactly_once(bs, sink)


@pytest.mark.slow
def test_copier_on_a_cluster_through_copier_and_coordinator_kills(
    tmp_path: Path, topic: str
) -> None:
    """On 3 nodes: the copier is killed -9 twice, then the node coordinating its
    transactions is killed -9 under it (and comes back); every output exactly once."""
    rng = random.Random(99)
    txn_partitions = 5
    with ClusterProcess(
        3,
        configs={**TEST_DEFAULTS, "transaction.state.log.num.partitions": str(txn_partitions)},
        data_dir=tmp_path / "cluster",
    ) as cluster:
        bs = cluster.bootstrap_servers
        sink = f"{topic}-out"
        write_input(bs, topic, sink, cluster)
        for _ in range(2):
            copier = start_copier(bs, topic, sink)
            try:
                wait_for_progress(bs, sink, copier)
                time.sleep(rng.uniform(0, 0.4))
            finally:
                copier.kill()
                copier.wait()
        copier = start_copier(bs, topic, sink)
        try:
            wait_for_progress(bs, sink, copier)
            coordinator = cluster.leader(
                TRANSACTION_STATE_TOPIC, partition_for_group(f"{topic}-copier", txn_partitions)
            )
            cluster.kill(coordinator)
            cluster.start_node(coordinator)
            deadline = time.monotonic() + 3 * DEADLINE_S
            while copied(bs, sink) < RECORDS:
                assert copier.poll() is None, "the copier died on its own"
                assert time.monotonic() < deadline, "the copier never finished"
                time.sleep(0.5)
        finally:
            copier.kill()
            copier.wait()
        check_exactly_once(bs, sink)
