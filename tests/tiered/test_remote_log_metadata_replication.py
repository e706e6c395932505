"""``__remote_log_metadata`` gets ``remote.log.metadata.topic.replication.factor`` (3)
replicas in a 3-node cluster started node by node: while only two brokers are up the
controller refuses the topic (INVALID_REPLICATION_FACTOR) and the brokers try again; the
third broker's arrival lets it be created with all three, as Kafka's
TopicBasedRemoteLogMetadataManager does."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.storage.remote.metadata_records import REMOTE_LOG_METADATA_TOPIC
from moldau.testing.cluster import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.tiered.test_tiered_broker import wait_for

pytestmark = pytest.mark.slow

PARTITIONS = 3


def test_the_metadata_topic_waits_for_its_replicas(tmp_path: Path) -> None:
    configs = {
        **TEST_DEFAULTS,
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "file",
        "rsm.config.dir": str(tmp_path / "remote"),
        "remote.log.metadata.topic.num.partitions": str(PARTITIONS),
    }
    c = ClusterProcess(3, configs=configs, data_dir=tmp_path / "cluster")
    try:
        first = [1, 2]  # a quorum of the three voters, so they serve
        for node, listening in [(c.node(i), c.node(i).launch()) for i in first]:
            node.wait_listening(listening)

        def refused() -> bool:
            for i in first:
                c.node(i).settle_output()
            return any(
                f"cannot create {REMOTE_LOG_METADATA_TOPIC} yet" in line
                and "replication factor of 3 cannot be reached" in line
                for i in first
                for line in c.node(i).output_since(0)
            )

        wait_for(refused, "the controller to refuse the topic with two brokers", timeout=60)
        assert REMOTE_LOG_METADATA_TOPIC not in c.describe()["topics"]
        c.start_node(3)
        wait_for(
            lambda: REMOTE_LOG_METADATA_TOPIC in c.describe()["topics"],
            "the topic once the third broker is up",
            timeout=60,
        )
        for p in range(PARTITIONS):
            assert sorted(c.partition(REMOTE_LOG_METADATA_TOPIC, p)["replicas"]) == [1, 2, 3]
    finally:
        c.close()
