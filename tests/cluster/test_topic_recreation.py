"""A topic deleted and created again under the same name keeps the new topic's records when
nodes crash and replay the metadata log batch by batch: the replayed deletion of the old
topic must not delete the new topic's logs (they are matched by topic id)."""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from moldau.config.topic import LogConfig
from moldau.storage.partition_metadata import read_topic_id
from moldau.storage.unified_log import UnifiedLog
from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster
from tests.integration.helpers import (
    DEADLINE_S,
    assert_log_matches,
    consume_confluent,
    make_records,
    produce_confluent,
    watermarks,
)

TOPIC = "reborn"
U64 = (1 << 64) - 1


def topic_id(cluster: ClusterProcess) -> bytes:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    (future,) = admin.describe_topics(TopicCollection([TOPIC])).values()
    uuid = future.result(DEADLINE_S).topic_id
    bits = (uuid.get_most_significant_bits() & U64) << 64
    return (bits | uuid.get_least_significant_bits() & U64).to_bytes(16, "big")


def fully_replicated(cluster: ClusterProcess) -> None:
    cluster.wait_until(lambda: len(cluster.partition(TOPIC)["isr"]) == 3, DEADLINE_S)


def test_a_topic_created_again_keeps_its_records_when_every_node_is_killed(
    new_cluster: NewCluster,
) -> None:
    cluster = new_cluster(3)
    cluster.create_topic(TOPIC, 1, replication_factor=3)
    produce_confluent(cluster.bootstrap_servers, TOPIC, make_records(10, seed=1))
    old_id = topic_id(cluster)
    cluster.delete_topic(TOPIC)
    cluster.wait_until(
        lambda: all(TOPIC not in cluster.describe(i)["topics"] for i in cluster.serving()),
        DEADLINE_S,
    )
    cluster.create_topic(TOPIC, 1, replication_factor=3)
    records = make_records(10, seed=2)
    acked = produce_confluent(cluster.bootstrap_servers, TOPIC, records)
    new_id = topic_id(cluster)
    assert new_id != old_id
    fully_replicated(cluster)

    for node in cluster.running():
        cluster.kill(node)
    cluster.start()
    fully_replicated(cluster)
    assert watermarks(cluster.bootstrap_servers, TOPIC) == {0: (0, 10)}
    assert_log_matches(records, consume_confluent(cluster.bootstrap_servers, TOPIC), acked=acked)

    # every replica holds the new topic's records, in a dir that names the new topic id
    for node in cluster.running():
        cluster.kill(node)
    for node in cluster.nodes.values():
        path = node.data_dir / f"{TOPIC}-0"
        assert read_topic_id(path) == new_id
        log = UnifiedLog.open(path, LogConfig.from_props({}))
        try:
            assert (log.log_start_offset, log.log_end_offset) == (0, 10)
        finally:
            log.close()
