"""Records in flight of a share group on a 3-node cluster whose partitions have different
leaders: `moldau groups describe` takes each partition's count from its own leader's
metrics endpoint (found through that node's metrics.port config), which is the only node
reporting it; they add up to what the consumer holds and drop to 0 once it acknowledges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message

from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.helpers import alter_group_config, confluent_producer, wait_until
from tests.integration.test_share_groups import poll, share_consumer
from tests.metrics.helpers import Samples

PARTITIONS, PER_PARTITION = 3, 4
ACQUIRED = "moldau_share_partition_acquired_records"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    running = ClusterProcess(3, None, dict(TEST_DEFAULTS), data_dir=tmp_path, metrics=True)
    try:
        yield running.start()
    finally:
        running.close()


def describe(bootstrap: str, group: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "moldau", "groups", "describe", group, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MOLDAU_BOOTSTRAP": bootstrap},
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def reported(cluster: ClusterProcess, group: str) -> dict[int, dict[int, float]]:
    """node id -> partition -> acquired records, as each node's endpoint reports them."""
    out: dict[int, dict[int, float]] = {}
    for node in cluster.running():
        series = Samples.scrape(cluster.metrics_url(node)).series(
            ACQUIRED, "group", "topic", "partition"
        )
        out[node] = {int(p): v for (g, _, p), v in series.items() if g == group}
    return out


@pytest.mark.slow  # a 3-node cluster
def test_in_flight_of_each_partition_comes_from_its_leader(cluster: ClusterProcess):
    bootstrap, topic, group = cluster.bootstrap_servers, "spread", "spread-g"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    alter_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = confluent_producer(bootstrap, **{"linger.ms": 60_000})  # a batch a partition
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    leaders = {p: cluster.leader(topic, p) for p in range(PARTITIONS)}
    assert len(set(leaders.values())) > 1, leaders  # else nothing is told apart

    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        held: list[Message] = []
        wait_until(lambda: bool(held.extend(poll(consumer)) or held), "records to hold")
        by_partition = Counter(m.partition() for m in held)
        nodes = reported(cluster, group)
        for node, partitions in nodes.items():  # only a partition's leader reports it
            assert all(leaders[p] == node for p in partitions), (node, partitions, leaders)
        truth = {p: nodes[leaders[p]].get(p, 0) for p in range(PARTITIONS)}
        for p, n in by_partition.items():  # the consumer may have prefetched more
            assert truth[p] >= n
        shown = describe(bootstrap, group)
        assert {o["partition"]: o["in_flight"] for o in shown["offsets"]} == {
            p: int(v) for p, v in truth.items() if p in {o["partition"] for o in shown["offsets"]}
        }
        assert shown["in_flight"] == sum(o["in_flight"] for o in shown["offsets"]) >= len(held)

        for m in held:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
    finally:
        consumer.close()  # gives back anything prefetched
    wait_until(
        lambda: describe(bootstrap, group)["in_flight"] == 0, "no record in flight", timeout=60
    )
    assert all(
        v == 0 for partitions in reported(cluster, group).values() for v in partitions.values()
    )
