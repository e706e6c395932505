"""KIP-320 with librdkafka on a cluster: a consumer in the middle of a partition whose
leader changes validates its position with OffsetForLeaderEpoch at the new leader, then
reads on: every record once, in order. The new leader fences the old epoch."""

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
from tests.integration.helpers import DEADLINE_S, RawClient
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


def test_consumer_validates_its_position_after_a_leader_change(tmp_path: Path) -> None:
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
            cluster.stop(old_leader)  # controlled shutdown: the leadership moves
            new_leader = cluster.wait_until(
                lambda: (lead := cluster.leader(TOPIC)) not in (old_leader, -1) and lead
            )
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
