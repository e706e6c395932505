"""Replication of the broker's internal topics: Kafka's configured factor in a cluster, 1
on a lone node that is its own quorum (a development setup works out of the box)."""

from __future__ import annotations

from moldau.config.broker import BrokerConfig


def test_a_lone_node_uses_one_replica() -> None:
    assert BrokerConfig({}).internal_topic_replication(3) == 1


def test_a_cluster_uses_the_configured_factor_uncapped() -> None:
    voters = {"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094"}
    assert BrokerConfig(voters).internal_topic_replication(3) == 3
    assert BrokerConfig(voters).internal_topic_replication(1) == 1


def test_the_remote_log_metadata_factor_is_read_under_kafkas_prefix() -> None:
    config = BrokerConfig(
        {
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "2",
        }
    )
    factor = config.remote_log_metadata_int("remote.log.metadata.topic.replication.factor")
    assert config.internal_topic_replication(factor) == 2
