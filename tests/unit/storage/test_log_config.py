"""Topic config parsing: Kafka names, defaults, broker synonyms and validation."""

from __future__ import annotations

import pytest

from moldau.config.topic import (
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigSource,
    LogConfig,
    resolve_configs,
)
from moldau.protocol.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_props({}, {})
    assert config == LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == ("delete",)
    assert config.file_delete_delay_ms == 60000
    assert config.min_insync_replicas == 1
    assert config.compression_type == "producer"
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.delete_retention_ms == 86400000
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == 2**63 - 1


def test_table_defaults_match_dataclass_defaults() -> None:
    acted = {name: d.default for name, d in TOPIC_CONFIGS.items() if d.field}
    assert LogConfig().to_props() == acted


def test_topic_overrides_win_over_broker_synonyms() -> None:
    config = LogConfig.from_props(
        {"retention.ms": "1000", "cleanup.policy": "compact, delete"},
        {"log.retention.ms": "2000", "log.segment.bytes": "2048", "log.cleanup.policy": "delete"},
    )
    assert config.retention_ms == 1000
    assert config.segment_bytes == 2048
    assert config.cleanup_policy == ("compact", "delete")
    assert config.delete_enabled


def test_broker_synonym_precedence_and_units() -> None:
    assert LogConfig.from_props({}, {"log.retention.hours": "2"}).retention_ms == 7_200_000
    assert LogConfig.from_props({}, {"log.retention.minutes": "3"}).retention_ms == 180_000
    both = {"log.retention.hours": "2", "log.retention.ms": "5"}
    assert LogConfig.from_props({}, both).retention_ms == 5
    assert LogConfig.from_props({}, {"log.retention.hours": "-1"}).retention_ms == -1
    assert LogConfig.from_props({}, {"log.roll.hours": "1"}).segment_ms == 3_600_000
    broker = {
        "log.flush.interval.messages": "10",
        "log.flush.interval.ms": "20",
        "message.max.bytes": "30",
        "log.index.interval.bytes": "40",
        "log.message.timestamp.type": "LogAppendTime",
        "log.retention.bytes": "50",
    }
    config = LogConfig.from_props({}, broker)
    assert (config.flush_messages, config.flush_ms, config.max_message_bytes) == (10, 20, 30)
    assert (config.index_interval_bytes, config.retention_bytes) == (40, 50)
    assert config.log_append_time


def test_resolve_reports_sources_for_describe_configs() -> None:
    resolved = resolve_configs({"retention.ms": "5"}, {"log.segment.bytes": "4096"})
    assert resolved["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert resolved["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert resolved["segment.bytes"].broker_key == "log.segment.bytes"
    assert resolved["segment.bytes"].value == "4096"
    assert resolved["flush.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert BROKER_SYNONYMS["log.retention.hours"] == "retention.ms"
    assert all(d.doc for d in TOPIC_CONFIGS.values())


@pytest.mark.parametrize(
    ("overrides", "defaults", "needle"),
    [
        ({"segment.bytes": "abc"}, {}, "segment.bytes"),
        ({"segment.bytes": "10"}, {}, "at least 14"),
        ({"segment.bytes": str(2**31)}, {}, "segment.bytes"),
        ({"retention.ms": "-2"}, {}, "retention.ms"),
        ({"message.timestamp.type": "Whenever"}, {}, "message.timestamp.type"),
        ({"cleanup.policy": "delete,shred"}, {}, "cleanup.policy"),
        ({"compression.type": "brotli"}, {}, "compression.type"),
        ({"min.insync.replicas": "0"}, {}, "min.insync.replicas"),
        ({"no.such.config": "1"}, {}, "no.such.config"),
        ({}, {"log.segment.bytes": "x"}, "log.segment.bytes"),
    ],
)
def test_invalid_values_are_rejected_with_the_key(overrides, defaults, needle) -> None:
    with pytest.raises(InvalidConfigError, match=needle.replace(".", r"\.")):
        LogConfig.from_props(overrides, defaults)


def test_compaction_configs() -> None:
    config = LogConfig.from_props(
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.25"},
        {"log.cleaner.delete.retention.ms": "1000", "log.cleaner.min.cleanable.ratio": "0.9"},
    )
    assert config.compact_enabled and config.delete_enabled
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.delete_retention_ms == 1000
    from_broker = LogConfig.from_props({}, {"log.cleaner.min.cleanable.ratio": "0.9"})
    assert from_broker.to_props()["min.cleanable.dirty.ratio"] == "0.9"
    assert not LogConfig().compact_enabled


@pytest.mark.parametrize("value", ["abc", "1.5", "-0.1", "nan", "inf"])
def test_dirty_ratio_must_be_a_double_between_0_and_1(value: str) -> None:
    with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
        LogConfig.from_props({"min.cleanable.dirty.ratio": value})
