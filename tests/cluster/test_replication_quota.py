"""Replication quotas (KIP-73) on a real two-node cluster: a reassignment whose new
replica catches up under ``kafka-reassign-partitions --throttle``'s configs takes as long
as the rate says, ``--verify``'s admin calls clear the throttles, and speed returns."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster
from tests.cluster.test_admin_cli import moldau

RATE = 150_000  # bytes per second, leader and follower side
RECORDS, SIZE = 1_200, 1_000
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"  # --verify clears it too
REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def alter(
    admin: AdminClient, kind: ResourceType, name: str, op: AlterConfigOpType, **kv: str
) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=op) for k, v in kv.items()]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def catch_up_seconds(
    cluster: ClusterProcess, admin: AdminClient, topic: str, throttle: bool
) -> tuple[float, float]:
    """Put ``topic``'s one partition on a second broker; seconds until it is in the ISR,
    counted from before the reassign command and from its return (the command's own
    start-up, seconds on a loaded machine, is in the first only)."""
    cluster.create_topic(topic, 1, replication_factor=1)
    source = cluster.leader(topic)
    target = next(n for n in cluster.nodes if n != source)
    # Batches of ~16 KB: a fetch returns whole batches, so a batch is the overshoot unit.
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "batch.size": 16_384, "linger.ms": 5}
    )
    for i in range(RECORDS):
        producer.produce(topic, bytes([i % 251]) * SIZE)
    assert producer.flush(60) == 0
    if throttle:  # what kafka-reassign-partitions --execute --throttle RATE sets
        for node in (source, target):
            alter(admin, ResourceType.BROKER, str(node), AlterConfigOpType.SET,
                  **{k: str(RATE) for k in RATES})  # fmt: skip
        alter(admin, ResourceType.TOPIC, topic, AlterConfigOpType.SET,
              **{REPLICAS[0]: f"0:{source}", REPLICAS[1]: f"0:{target}"})  # fmt: skip
    start = time.monotonic()
    moldau(cluster, f"reassign --topic {topic} --partition 0 --replicas {source},{target}")
    returned = time.monotonic()
    cluster.wait_until(lambda: target in cluster.partition(topic)["isr"], timeout=120)
    done = time.monotonic()
    if throttle:  # what --verify does once the reassignment is done
        for node in cluster.nodes:
            alter(admin, ResourceType.BROKER, str(node), AlterConfigOpType.DELETE,
                  **dict.fromkeys((*RATES, LOG_DIRS_RATE), ""))  # fmt: skip
        alter(admin, ResourceType.TOPIC, topic, AlterConfigOpType.DELETE,
              **dict.fromkeys(REPLICAS, ""))  # fmt: skip
    return done - start, done - returned


@pytest.mark.slow
def test_throttled_reassignment(new_cluster: NewCluster, topic: str) -> None:
    # Small fetches and a two-sample window keep the overshoot Kafka allows small:
    # one second's worth at the start, one fetch over the bound after.
    cluster = new_cluster(nodes=2, replica_fetch_max_bytes=16_384, replication_quota_window_num=2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    throttled, _ = catch_up_seconds(cluster, admin, f"{topic}-throttled", throttle=True)
    payload = RECORDS * SIZE
    least = (payload - RATE - 16_384) / RATE  # the first window's burst is allowed
    assert least * 0.8 <= throttled <= 60, throttled

    resource = ConfigResource(ResourceType.BROKER, str(next(iter(cluster.nodes))))
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs[RATES[0]].value == str(2**63 - 1)  # cleared: Kafka's default again
    _, free = catch_up_seconds(cluster, admin, f"{topic}-free", throttle=False)
    assert free < throttled / 2, (free, throttled)
    print(f"catch-up of {payload} B: {throttled:.1f} s at {RATE} B/s, {free:.1f} s unthrottled (after the command returned)")
