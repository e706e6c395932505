"""Per-group configs: Kafka's names and bounds, kept in the metadata image as ConfigRecords
of resource type GROUP (32), and carried by snapshots."""

from __future__ import annotations

import pytest

from moldau.config.group import GROUP_CONFIGS, validate_group_configs
from moldau.metadata.image import GROUP_RESOURCE, MetadataImage
from moldau.metadata.records import ConfigRecord
from moldau.metadata.snapshot import image_to_records
from moldau.protocol.errors import ErrorCode, KafkaError


def test_names_defaults_and_bounds_are_kafkas() -> None:
    lock = GROUP_CONFIGS["share.record.lock.duration.ms"]
    assert (lock.default, lock.minimum, lock.maximum) == ("30000", 15000, 60000)
    assert GROUP_CONFIGS["share.auto.offset.reset"].default == "latest"
    assert GROUP_CONFIGS["consumer.session.timeout.ms"].broker_key == (
        "group.consumer.session.timeout.ms"
    )
    validate_group_configs(
        {"share.auto.offset.reset": "earliest", "share.session.timeout.ms": "50000"}
    )
    for bad in (
        {"share.record.lock.duration.ms": "14999"},
        {"share.auto.offset.reset": "somewhere"},
        {"consumer.heartbeat.interval.ms": "fast"},
        {"no.such.config": "1"},
    ):
        with pytest.raises(KafkaError) as e:
            validate_group_configs(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG


def test_group_configs_live_in_the_image_and_its_snapshot() -> None:
    def rec(name: str, value: str | None) -> ConfigRecord:
        return ConfigRecord(resource_type=GROUP_RESOURCE, resource_name="g", name=name, value=value)

    image = MetadataImage().apply(
        [rec("share.auto.offset.reset", "earliest"), rec("share.session.timeout.ms", "50000")]
    )
    assert dict(image.group_configs["g"]) == {
        "share.auto.offset.reset": "earliest",
        "share.session.timeout.ms": "50000",
    }
    assert image.broker_configs == {}
    restored = MetadataImage().apply(image_to_records(image))
    assert restored.group_configs == image.group_configs
    image = image.apply(
        [rec("share.auto.offset.reset", None), rec("share.session.timeout.ms", None)]
    )
    assert "g" not in image.group_configs


def test_the_brokers_min_and_max_keys_bound_group_configs() -> None:
    lowered = {"group.share.min.record.lock.duration.ms": "1000"}
    validate_group_configs({"share.record.lock.duration.ms": "5000"}, lowered)
    with pytest.raises(KafkaError, match=r"\[1000, 60000\]"):
        validate_group_configs({"share.record.lock.duration.ms": "70000"}, lowered)
    with pytest.raises(KafkaError, match=r"\[15000, 60000\]"):
        validate_group_configs({"share.record.lock.duration.ms": "5000"}, {})


def test_consumer_session_must_outlast_its_heartbeat_interval() -> None:
    """Kafka's bounds for KIP-848's group configs, and session > heartbeat interval."""
    validate_group_configs(
        {"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "15000"}
    )
    for bad in (
        {"consumer.session.timeout.ms": "44999"},
        {"consumer.session.timeout.ms": "60001"},
        {"consumer.heartbeat.interval.ms": "4999"},
        {"consumer.heartbeat.interval.ms": "15001"},
    ):
        with pytest.raises(KafkaError, match="Value must be in") as e:
            validate_group_configs(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG
    lowered = {"group.consumer.min.session.timeout.ms": "6000"}
    validate_group_configs({"consumer.session.timeout.ms": "6000"}, lowered)
    with pytest.raises(KafkaError, match="must be greater than consumer.heartbeat"):
        validate_group_configs(
            {"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "6000"},
            lowered,
        )
