"""Every client against a three-node cluster: confluent-kafka, kafka-python, aiokafka, kcat
and the Java client each produce to a topic with replication factor 3 whose partitions are
led by all three nodes, and read back every acknowledged record (the whole log checked as
in tests/integration/test_clients.py)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from moldau.testing import ClusterProcess
from tests.integration.helpers import CONSUMERS, PRODUCERS, assert_log_matches
from tests.integration.test_clients import records_for
from tests.java.client import JavaClient

PARTITIONS = 6
N_RECORDS = 1000
CODEC = {"confluent": "zstd", "kafka-python": "gzip", "aiokafka": "lz4", "kcat": "snappy"}


def partitions(cluster: ClusterProcess, topic: str) -> list[dict[str, Any]]:
    return list(cluster.describe()["topics"][topic])


@pytest.mark.parametrize(
    "client",
    [
        *(c for c in CODEC if c != "kcat"),
        pytest.param(
            "kcat",
            marks=pytest.mark.skipif(shutil.which("kcat") is None, reason="no kcat"),
        ),
        "java",
    ],
)
def test_produce_and_consume_with_replication_factor_3(
    shared_cluster: ClusterProcess, topic: str, client: str, request: pytest.FixtureRequest
) -> None:
    cluster = shared_cluster
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    parts = partitions(cluster, topic)
    assert all(sorted(p["replicas"]) == sorted(cluster.nodes) for p in parts), parts
    assert {p["leader"] for p in parts} == set(cluster.nodes), "every node leads partitions"

    records = records_for("kcat" if client == "kcat" else "confluent", N_RECORDS, seed=len(client))
    bootstrap = cluster.bootstrap_servers
    if client == "java":
        java: JavaClient = request.getfixturevalue("java")
        acked = java.produce(bootstrap, topic, records, "zstd")
        consumed = java.consume(bootstrap, topic)
    else:
        acked = PRODUCERS[client](bootstrap, topic, records, CODEC[client])
        if client == "kcat":
            consumed = CONSUMERS[client](bootstrap, topic)
        else:
            # aiokafka and kafka-python ack at acks=1, before the followers have the records
            # and the HW moves: read up to what was acked, not the watermarks of the moment.
            ends = {p: (0, 0) for p in range(PARTITIONS)}
            for p, offset in acked.values():
                ends[p] = (0, max(ends[p][1], offset + 1))
            consumed = CONSUMERS[client](bootstrap, topic, ends)
    assert_log_matches(records, consumed, acked=acked)
    assert sum(1 for gots in consumed.values() if gots) > 1, "keys all hashed to one partition"
    in_sync = [sorted(cluster.nodes)] * PARTITIONS  # every replica keeps up
    cluster.wait_until(lambda: [sorted(p["isr"]) for p in partitions(cluster, topic)] == in_sync)
