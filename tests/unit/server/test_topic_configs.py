"""How topic and broker configs are reported to DescribeConfigs: values, sources, synonyms."""

from __future__ import annotations

from types import MappingProxyType

from moldau.config.broker import BrokerConfig
from moldau.config.catalog import BROKER_CATALOG
from moldau.config.topic import TOPIC_CONFIGS, ConfigSource
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.server.dynamic_config import DynamicBrokerConfig
from moldau.server.topic_configs import ConfigType, DescribeOptions, describe_broker, describe_topic

ALL = DescribeOptions(keys=None, synonyms=True, documentation=True)


def by_name(entries: list) -> dict:
    return {e.name: e for e in entries}


def test_topic_override_beats_broker_setting_beats_default() -> None:
    broker = {
        "log.retention.minutes": "10",
        "log.retention.hours": "1",
        "log.segment.bytes": "2048",
    }
    configs = by_name(describe_topic({"segment.bytes": "4096"}, broker, ALL))
    assert sorted(configs) == sorted(TOPIC_CONFIGS)

    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source, segment.is_default) == (
        "4096",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
    )
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("segment.bytes", "4096", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "2048", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG),
    ]

    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source) == (
        "600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [(s.name, s.source) for s in retention.synonyms] == [
        ("log.retention.minutes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DEFAULT_CONFIG),
    ]

    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.is_default, policy.read_only) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
        True,
        False,
    )
    assert policy.config_type == ConfigType.LIST and policy.documentation


def test_keys_filter_and_optional_parts() -> None:
    opts = DescribeOptions(
        keys=frozenset({"retention.ms", "no.such"}), synonyms=False, documentation=False
    )
    (entry,) = describe_topic({}, {}, opts)
    assert (entry.name, entry.synonyms, entry.documentation) == ("retention.ms", [], None)
    assert entry.config_type == ConfigType.LONG
    assert describe_topic({}, {}, DescribeOptions(frozenset(), True, True)) == []


def broker_config(props: dict[str, str]) -> DynamicBrokerConfig:
    return DynamicBrokerConfig(BrokerConfig(props))


def test_broker_configs_with_their_source() -> None:
    configs = by_name(
        describe_broker(broker_config({"num.partitions": "3", "log.retention.hours": "24"}), ALL)
    )
    # Every key Kafka defines is described; only Kafka's dynamic ones can be altered.
    assert configs.keys() == BROKER_CATALOG.keys()
    assert {name for name, e in configs.items() if not e.read_only} == {
        name for name, e in BROKER_CATALOG.items() if e.dynamic
    }
    assert configs["num.io.threads"].read_only is False  # Kafka: cluster-wide
    assert configs["auto.create.topics.enable"].read_only is True
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert configs["num.partitions"].config_type == ConfigType.INT
    assert configs["delete.topic.enable"].config_type == ConfigType.BOOLEAN
    assert (configs["log.retention.hours"].value, configs["log.retention.hours"].is_default) == (
        "24",
        False,
    )
    # Unset broker synonyms: the first (same-unit) key carries the topic default.
    assert configs["log.retention.ms"].value == "604800000"
    assert configs["log.retention.minutes"].value is None
    assert configs["log.retention.minutes"].config_source == ConfigSource.DEFAULT_CONFIG


def test_dynamic_listener_configs_and_passwords_are_described() -> None:
    config = broker_config({})
    key = "listener.name.plaintext.ssl.keystore.location"
    dynamic = {"1": MappingProxyType({key: "/ks.p12", "ssl.key.password": "secret"})}
    config.on_metadata_update(
        MetadataImage(), MetadataImage(broker_configs=MappingProxyType(dynamic)), LocalChanges()
    )
    configs = by_name(describe_broker(config, ALL))
    assert (configs[key].value, configs[key].config_source) == (
        "/ks.p12",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    password = configs["ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert password.config_source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert configs["num.io.threads"].documentation.startswith("Not acted on by Moldau")
