"""KIP-320 on a cluster: a consumer in the middle of a partition whose leader changes
validates its position with OffsetForLeaderEpoch at the new leader, then reads on: every
record once, in order. librdkafka first, then (after a second leader change) the Java
client. The new leader fences the old epoch."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.helpers import DEADLINE_S, RawClient, metadata_request
from tests.java.client import JavaClient, consumed
from tests.metrics.helpers import Samples

TOPIC = "kip320"
COUNT = 2000


def read(consumer: Consumer, values: list[bytes], until: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < until:
        assert time.monotonic() < deadline, f"read {len(values)} of {until}"
        for msg in consumer.consume(500, timeout=0.5):
            assert msg.error() is None, msg.error()
            values.append(msg.value())


def end_offset_for(node: str, epoch: int, current: int) -> tuple[int, int, int]:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderTopic(
                topic=TOPIC,
                partitions=[
                    OffsetForLeaderPartition(
                        partition=0, leader_epoch=epoch, current_leader_epoch=current
                    )
                ],
            )
        ],
    )
    with RawClient(node) as client:
        (p,) = client.request(request, 4).topics[0].partitions
    return p.error_code, p.leader_epoch, p.end_offset


def current_epoch_placed(node: str) -> int:
    """Where ``node``, as the leader, says its current leader epoch ends (-1: unknown)."""
    with RawClient(node) as client:
        (topic,) = client.request(metadata_request([TOPIC]), 12).topics
    epoch = topic.partitions[0].leader_epoch
    error, found, end = end_offset_for(node, epoch, epoch)
    return end if (error, found) == (ErrorCode.NONE, epoch) else -1


def new_leader_after_stopping(cluster: ClusterProcess, old: int) -> int:
    cluster.stop(old)  # controlled shutdown: the leadership moves
    return int(
        cluster.wait_until(lambda: (lead := cluster.leader(TOPIC)) not in (old, -1) and lead)
    )


def test_consumers_validate_their_position_after_a_leader_change(
    tmp_path: Path, java: JavaClient
) -> None:
    cluster = ClusterProcess(3, configs=TEST_DEFAULTS, data_dir=tmp_path / "c", metrics=True)
    with cluster.start():
        cluster.create_topic(TOPIC, 1, replication_factor=3)
        cluster.produce(TOPIC, *(b"v%05d" % i for i in range(COUNT)))
        old_leader = cluster.leader(TOPIC)
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "kip320",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            values: list[bytes] = []
            read(consumer, values, COUNT // 2)
            new_leader = new_leader_after_stopping(cluster, old_leader)
            # Before any append, the new leader places its own epoch: it starts at the log
            # end (Kafka's makeLeader records it), not "unknown".
            node = cluster.node(new_leader).bootstrap_servers
            cluster.wait_until(lambda: current_epoch_placed(node) == COUNT)
            cluster.produce(TOPIC, *(b"w%05d" % i for i in range(COUNT)))
            read(consumer, values, 2 * COUNT)
        finally:
            consumer.close()
        expected = [b"v%05d" % i for i in range(COUNT)] + [b"w%05d" % i for i in range(COUNT)]
        assert values == expected
        asked = Samples.scrape(cluster.metrics_url(new_leader)).requests("OffsetForLeaderEpoch")
        assert asked >= 1, "librdkafka did not validate its position at the new leader"
        # The old epoch ends where the new leader's epoch starts; it is fenced as current.
        node = cluster.node(new_leader).bootstrap_servers
        error, epoch, end = end_offset_for(node, 0, -1)
        assert (error, epoch, end) == (ErrorCode.NONE, 0, COUNT)
        assert end_offset_for(node, 0, 0)[0] == ErrorCode.FENCED_LEADER_EPOCH

        # The Java client, positioned at the end, across a second leader change (the first
        # node back first: stopping two of three would lose the controller quorum).
        cluster.start_node(old_leader)
        cluster.wait_until(lambda: old_leader in cluster.partition(TOPIC)["isr"])
        process = java.start(
            "consume", "--bootstrap", cluster.bootstrap_servers, "--topic", TOPIC,
            "--from-earliest", "--max-records", str(3 * COUNT), "--timeout-ms", "90000",
            "--config", "metadata.max.age.ms=500",
        )  # fmt: skip
        try:
            process.wait_for(
                lambda e: e.get("offset") == 2 * COUNT - 1, "the Java consumer at the end"
            )
            last_leader = new_leader_after_stopping(cluster, new_leader)
            cluster.produce(TOPIC, *(b"x%05d" % i for i in range(COUNT)))
            result = process.result(DEADLINE_S)
        finally:
            process.kill()
        assert result.returncode == 0 and not result.errors, str(result)
        got = [g.value for g in consumed(result.events)[0]]
        assert got == expected + [b"x%05d" % i for i in range(COUNT)]
        asked = Samples.scrape(cluster.metrics_url(last_leader)).requests("OffsetForLeaderEpoch")
        assert asked >= 1, "the Java client did not validate its position at the new leader"
