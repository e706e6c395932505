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


def test_acks_all_requests_in_flight_are_acknowledged_and_stored_in_order(
    shared_cluster: ClusterProcess, topic: str
) -> None:
    """linger.ms=0 with many requests in flight on one connection: the leader handles the
    next produce while earlier ones wait for the followers, yet every record is acked
    once, at offsets in the order it was sent, and the log holds exactly those records."""
    from confluent_kafka import Producer

    cluster = shared_cluster
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
            "max.in.flight.requests.per.connection": 100,
            "retries": 0,  # a retry could reorder: every record must land first time
        }
    )
    acked: list[tuple[bytes, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.value(), msg.offset()))

    values = [b"r%04d" % i for i in range(600)]
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert sorted(acked, key=lambda a: a[1]) == [(v, i) for i, v in enumerate(values)]
    assert [r.value for r in cluster.consume(topic, len(values), timeout=60)] == values
