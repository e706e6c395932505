"""Tiered storage configs as Kafka checks them: in CreateTopics and AlterConfigs, on the
controller, against remote.log.storage.system.enable."""

from __future__ import annotations

import pytest

from moldau.config.broker import BrokerConfig, ConfigError
from moldau.config.topic import LogConfig
from moldau.controller.topic_control import TopicControl
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import RegisterBrokerRecord
from moldau.protocol.errors import ErrorCode

TIERED = {"remote.storage.enable": "true"}


def make(*, system_enabled: bool = True) -> tuple[TopicControl, MetadataImage]:
    controller = TopicControl(
        node_id=1,
        broker_props={},
        default_partitions=1,
        remote_storage_system_enable=system_enabled,
    )
    return controller, MetadataImage().apply([RegisterBrokerRecord(broker_id=1, fenced=False)])


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_props({}, {})
    assert not config.remote_storage_enable
    assert config.local_retention_ms == config.local_retention_bytes == -2
    assert not config.remote_log_copy_disable and not config.remote_log_delete_on_disable
    # -2: the local tier keeps as much as the whole log
    assert config.local_log_retention_ms == config.retention_ms == 604800000
    assert config.local_log_retention_bytes == config.retention_bytes == -1
    broker = LogConfig.from_props({}, {"log.local.retention.ms": "1000"})
    assert broker.local_log_retention_ms == 1000


def test_a_tiered_topic_is_created_with_local_retention_below_total() -> None:
    c, image = make()
    configs = {**TIERED, "local.retention.ms": "1000", "retention.ms": "60000"}
    outcome = c.create_topic(image, "t", 1, 1, configs)
    assert outcome.error == ErrorCode.NONE
    assert image.apply(outcome.records).topics["t"].configs == configs


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"cleanup.policy": "compact"}, "unsupported for the compacted topics"),
        ({"cleanup.policy": "delete,compact"}, "unsupported for the compacted topics"),
        ({"local.retention.ms": "2000", "retention.ms": "1000"}, "must not be more than"),
        ({"local.retention.bytes": "-1", "retention.bytes": "1000"}, "must not be -1"),
        (
            {"remote.log.copy.disable": "true", "local.retention.ms": "10"},
            "must be set to the identical value",
        ),
        ({"local.retention.ms": "-3"}, "local.retention.ms"),
    ],
)
def test_invalid_tiered_topics_are_refused(configs: dict[str, str], message: str) -> None:
    c, image = make()
    outcome = c.create_topic(image, "t", 1, 1, {**TIERED, **configs})
    assert outcome.error == ErrorCode.INVALID_CONFIG
    assert message in (outcome.message or "")
    assert not outcome.records


def test_a_broker_without_tiered_storage_refuses_it() -> None:
    c, image = make(system_enabled=False)
    outcome = c.create_topic(image, "t", 1, 1, TIERED)
    assert outcome.error == ErrorCode.INVALID_CONFIG
    assert "Tiered Storage functionality is disabled" in (outcome.message or "")
    image = image.apply(c.create_topic(image, "u", 1, 1, {}).records)
    outcome = c.alter_topic_configs(image, "u", TIERED, replace=False)
    assert outcome.error == ErrorCode.INVALID_CONFIG


def test_alter_configs_checks_tiering_like_create() -> None:
    c, image = make()
    image = image.apply(c.create_topic(image, "t", 1, 1, TIERED).records)
    compact = c.alter_topic_configs(image, "t", {"cleanup.policy": "compact"}, replace=False)
    assert compact.error == ErrorCode.INVALID_CONFIG
    # turning tiering off must say that the remote data goes (KIP-950)
    off = c.alter_topic_configs(image, "t", {"remote.storage.enable": "false"}, replace=False)
    assert off.error == ErrorCode.INVALID_CONFIG
    assert "remote.log.delete.on.disable=true" in (off.message or "")
    changes: dict[str, str | None] = {
        "remote.storage.enable": "false",
        "remote.log.delete.on.disable": "true",
    }
    assert c.alter_topic_configs(image, "t", changes, replace=False).error == ErrorCode.NONE
    read_only = {"remote.log.copy.disable": "true"}
    assert c.alter_topic_configs(image, "t", read_only, replace=False).error == ErrorCode.NONE


def test_broker_keys_and_prefixes() -> None:
    config = BrokerConfig(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "file",
            "rsm.config.dir": "/tmp/remote",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "7",
        }
    )
    assert config.unknown == []
    assert config.remote_storage_manager_configs() == {"dir": "/tmp/remote"}
    assert config.remote_log_metadata_int("remote.log.metadata.topic.num.partitions") == 7
    assert config.remote_log_metadata_int("remote.log.metadata.topic.replication.factor") == 3
    assert config.int("remote.log.manager.task.interval.ms") == 30000
    assert config.int("remote.log.manager.thread.pool.size") == 10
    assert config.int("remote.log.reader.threads") == 10
    assert config.int("remote.log.index.file.cache.total.size.bytes") == 1 << 30
    assert config.get("remote.log.storage.manager.impl.prefix") == "rsm.config."
    with pytest.raises(ConfigError, match="log.local.retention.ms|local.retention.ms"):
        BrokerConfig(
            {
                "remote.log.storage.system.enable": "true",
                "log.retention.ms": "1000",
                "log.local.retention.ms": "5000",
            }
        )
