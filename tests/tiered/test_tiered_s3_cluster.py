"""Three nodes, RF 3, tiering to a real S3 server (SeaweedFS): the leader is killed (-9)
while it copies and while a consumer reads the remote tier; the consumer goes on, a new
leader continues the copies; the old leader, restarted, rejoins the ISR with the leader's
log, and once the segments have left every disk each acknowledged record is read back from
offset 0. A topic deleted while its only replica is down (no broker writes its DELETE_PARTITION_MARKED) still leaves the bucket
empty."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from moldau.testing.cluster import ClusterProcess
from moldau.testing.seaweedfs import SeaweedFS
from tests.tiered.test_tiered_broker import TIERED, read_confluent, wait_for
from tests.tiered.test_tiered_rejoin import (
    REJOIN_TIMEOUT_S,
    assert_same_local_log,
    local_start,
    metadata_on_every_node,
)
from tests.tiered.test_tiered_s3 import produce_batches

pytestmark = pytest.mark.slow

TOPIC_CONFIGS = {k.replace(".", "_"): v for k, v in TIERED.items()}


@pytest.fixture(scope="module")
def cluster(seaweedfs: SeaweedFS) -> Iterator[ClusterProcess]:
    configs = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "s3",
        **seaweedfs.rsm_configs("rsm.config."),
        "remote.log.manager.task.interval.ms": "200",
        "remote.log.manager.task.retry.backoff.max.ms": "2000",
        "log.retention.check.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": "3",
    }
    with ClusterProcess(3, configs=configs) as c:
        metadata_on_every_node(c)
        yield c


def remote_logs(seaweedfs: SeaweedFS, topic: str) -> int:
    return sum(k.endswith(".log") for k in seaweedfs.keys(f"{topic}-"))


class SlowReader(threading.Thread):
    """A consumer reading ``topic-0`` from offset 0 one small fetch at a time, until it
    has ``count`` records; it keeps every value and every error it was told."""

    def __init__(self, c: ClusterProcess, topic: str, count: int) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap_servers,
                "group.id": "unused",
                "enable.auto.commit": False,
                "fetch.max.bytes": 1024,
                "message.max.bytes": 1000,
                "max.partition.fetch.bytes": 1024,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.count = count
        self.values: list[bytes] = []
        self.errors: list[str] = []

    def run(self) -> None:
        deadline = time.monotonic() + 120
        try:
            while len(self.values) < self.count and time.monotonic() < deadline:
                for m in self.consumer.consume(1, timeout=0.5):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                    else:
                        self.values.append(m.value())
                time.sleep(0.05)  # paced: the leader dies while this reads
        finally:
            self.consumer.close()


def test_leader_killed_mid_copy_and_mid_read_loses_nothing(
    cluster: ClusterProcess, seaweedfs: SeaweedFS
) -> None:
    c, topic = cluster, "s3-replicated"
    c.create_topic(topic, 1, replication_factor=3, min_insync_replicas="2", **TOPIC_CONFIGS)
    acked = produce_batches(c, topic, "first", 30)
    wait_for(lambda: remote_logs(seaweedfs, topic) >= 3, "the first leader's copies")
    reader = SlowReader(c, topic, len(acked))
    reader.start()
    wait_for(lambda: reader.values, "the reader to start")
    old = c.leader(topic)
    c.kill(old)  # copies of the 30 segments are still under way
    assert len(reader.values) < len(acked), "the read ended before the kill"
    wait_for(lambda: c.leader(topic) not in (-1, old), "a new leader")
    copied_before = remote_logs(seaweedfs, topic)
    acked += produce_batches(c, topic, "second", 10)
    reader.join(150)
    assert not reader.is_alive()
    assert reader.values == acked[: reader.count], reader.errors
    wait_for(
        lambda: remote_logs(seaweedfs, topic) >= copied_before + 5,
        "the new leader's copies",
        timeout=90,
    )
    c.start_node(old)
    # the restarted old leader rejoins the ISR with the leader's log, and the first
    # segments leave every disk, its own too
    wait_for(lambda: old in c.partition(topic)["isr"], "the old leader to rejoin", REJOIN_TIMEOUT_S)
    assert_same_local_log(c, topic, old)
    try:
        wait_for(
            lambda: all(local_start(c, n, topic) > 40 for n in c.nodes),
            "segments to leave every disk",
            timeout=90,
        )
    except AssertionError:
        starts = {n: local_start(c, n, topic) for n in c.nodes}
        raise AssertionError(f"local log starts {starts}, {c.partition(topic)}") from None
    assert read_confluent(c, topic, "read_committed") == acked


def test_topic_deleted_while_its_replica_is_down_leaves_no_object(
    cluster: ClusterProcess, seaweedfs: SeaweedFS
) -> None:
    c, topic = cluster, "s3-orphaned"
    c.create_topic(topic, 1, replication_factor=1, **TOPIC_CONFIGS)
    produce_batches(c, topic, "orphan", 8)
    wait_for(lambda: remote_logs(seaweedfs, topic) >= 3, "copies of the topic")
    (only,) = c.partition(topic)["replicas"]
    c.kill(only)
    try:
        c.delete_topic(topic)
        # no replica writes DELETE_PARTITION_MARKED: the remover finds the partition
        # from its segments (after broker.session.timeout.ms without its topic)
        wait_for(lambda: not seaweedfs.keys(f"{topic}-"), "the bucket to be empty", timeout=90)
    finally:
        c.start_node(only)
