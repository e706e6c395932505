"""Moldau's config definitions checked against Kafka's own (src/moldau/config/kafka_configs.json,
written by scripts/extract_kafka_configs.py)."""

from __future__ import annotations

import pytest

from moldau.config.broker import BROKER_KEYS, BrokerConfig, ConfigError
from moldau.config.catalog import BROKER_CATALOG
from moldau.config.kafka import KAFKA_BROKER_CONFIGS, KAFKA_TOPIC_CONFIGS
from moldau.config.topic import BROKER_SYNONYMS, TOPIC_CONFIGS, LogConfig
from moldau.coordinator.group.config import GroupConfig
from moldau.protocol.errors import InvalidConfigError
from moldau.server.dynamic_config import DynamicBrokerConfig

_PY_TYPES = {
    int: ("int", "long", "short"),
    bool: ("boolean",),
    str: ("string", "list", "class", "password"),
}


def test_the_extracted_table_is_kafkas() -> None:
    # A few facts anyone can look up, so a broken extraction cannot pass unnoticed.
    assert len(KAFKA_BROKER_CONFIGS) > 300 and len(KAFKA_TOPIC_CONFIGS) > 30
    relogin = KAFKA_BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.type, relogin.default, relogin.update_mode) == ("long", "60000", "per-broker")
    assert KAFKA_BROKER_CONFIGS["offsets.topic.replication.factor"].default == "3"
    assert KAFKA_BROKER_CONFIGS["auto.create.topics.enable"].update_mode == "read-only"
    assert KAFKA_BROKER_CONFIGS["log.cleaner.threads"].update_mode == "cluster-wide"
    assert KAFKA_BROKER_CONFIGS["leader.replication.throttled.rate"].dynamic_only
    gzip = KAFKA_TOPIC_CONFIGS["compression.gzip.level"]
    assert (gzip.minimum, gzip.maximum, gzip.also) == (1, 9, ("-1",))


def test_every_kafka_config_is_known() -> None:
    assert KAFKA_TOPIC_CONFIGS.keys() <= TOPIC_CONFIGS.keys()
    assert KAFKA_BROKER_CONFIGS.keys() <= BROKER_CATALOG.keys()
    # Moldau's own keys are the only ones Kafka does not define (plus the authorizer's).
    own = {k for k in BROKER_CATALOG if k not in KAFKA_BROKER_CONFIGS}
    assert own == {
        "metrics.host",
        "metrics.port",
        "socket.request.read.timeout.ms",
        "log.segment.open.files.max",
        "max.broker.partitions",
        "cluster.id",
        "super.users",
        "allow.everyone.if.no.acl.found",
        # Kafka reads these under the metadata manager's prefix (rlmm.config.<key>), which
        # Moldau honours too; unprefixed they are Moldau's defaults for the same settings.
        "remote.log.metadata.topic.replication.factor",
        "remote.log.metadata.topic.num.partitions",
        "remote.log.metadata.topic.retention.ms",
        # Kafka's internal (undocumented) backoff of the remote log manager's tasks.
        "remote.log.manager.task.retry.backoff.ms",
        "remote.log.manager.task.retry.backoff.max.ms",
        # Kafka 4.0/4.1's share-group switch (after the 3.9 table), accepted for old tools.
        "group.share.enable",
        # Kafka's internal (undocumented) switch of online group upgrades and downgrades.
        "group.consumer.migration.policy",
        # Kafka 4.0's share coordinator (KIP-932), after the 3.9 table, with its defaults.
        "share.coordinator.state.topic.num.partitions",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "share.coordinator.state.topic.segment.bytes",
        "share.coordinator.snapshot.update.records.per.snapshot",
        "share.coordinator.write.timeout.ms",
        # The schema registry inside the server (docs/schema-registry.md).
        "schema.registry.listeners",
        "schema.registry.advertised.listener",
        "schema.registry.authentication.method",
    }
    # Topic configs of Confluent Server's, not Kafka's: broker-side schema validation.
    assert TOPIC_CONFIGS.keys() - KAFKA_TOPIC_CONFIGS.keys() == CONFLUENT_TOPIC_CONFIGS


CONFLUENT_TOPIC_CONFIGS = {
    f"confluent.{part}.{key}"
    for part in ("key", "value")
    for key in ("schema.validation", "subject.name.strategy")
}


def test_topic_definitions_match_kafka() -> None:
    for name, d in TOPIC_CONFIGS.items():
        if name in CONFLUENT_TOPIC_CONFIGS:
            continue
        k = KAFKA_TOPIC_CONFIGS[name]
        assert d.type == k.type, name
        assert d.default == (k.default or ""), name
        assert (d.minimum, d.maximum) == (k.minimum, k.maximum), name
        assert set(d.choices) == set(k.choices), name
        assert d.first_synonym == k.server_default_property, name
        # Every broker synonym is a Kafka broker key of the same type family.
        for broker_key, _ in d.synonyms:
            assert broker_key in KAFKA_BROKER_CONFIGS, broker_key


def test_broker_definitions_match_kafka() -> None:
    for name, spec in BROKER_KEYS.items():
        k = KAFKA_BROKER_CONFIGS.get(name)
        if k is None:
            continue
        assert k.type in _PY_TYPES[spec.type], name
        if spec.default != (k.default or ""):
            assert spec.why_default, f"{name}: {spec.default!r} is not Kafka's {k.default!r}"
        else:
            assert not spec.why_default, f"{name}: why_default but the default is Kafka's"
    for name, entry in BROKER_CATALOG.items():
        if entry.kafka is not None:
            assert entry.update_mode == entry.kafka.update_mode, name
        assert entry.doc, name


def test_not_acted_on_configs_are_accepted_and_validated() -> None:
    config = BrokerConfig({"num.io.threads": "16", "sasl.kerberos.service.name": "kafka"})
    assert config.unknown == []
    with pytest.raises(ConfigError, match="num.io.threads"):
        BrokerConfig({"num.io.threads": "0"})
    with pytest.raises(ConfigError, match="security.inter.broker.protocol"):
        BrokerConfig({"security.inter.broker.protocol": "SOMETIMES"})
    assert BrokerConfig({"no.such.key": "1"}).unknown == ["no.such.key"]
    log = LogConfig.from_props({"preallocate": "true", "compression.gzip.level": "-1"})
    assert log == LogConfig()  # accepted, not acted on
    with pytest.raises(InvalidConfigError, match="compression.gzip.level"):
        LogConfig.from_props({"compression.gzip.level": "0"})
    LogConfig.from_props({"compression.zstd.level": "-100"})
    with pytest.raises(InvalidConfigError, match="no more than 22"):
        LogConfig.from_props({"compression.zstd.level": "23"})


def test_empty_cleanup_policy_is_neither_delete_nor_compact() -> None:
    log = LogConfig.from_props({"cleanup.policy": ""})
    assert log.cleanup_policy == () and not log.delete_enabled and not log.compact_enabled
    with pytest.raises(InvalidConfigError):
        LogConfig.from_props({"cleanup.policy": "delete,shred"})


@pytest.mark.parametrize(
    ("key", "value", "per_broker", "refusal"),
    [
        ("sasl.kerberos.min.time.before.relogin", "58000", True, None),
        ("num.io.threads", "16", False, None),
        ("num.io.threads", "16", True, None),
        ("log.retention.ms", "1000", False, None),
        ("log.cleaner.threads", "2", False, None),
        ("leader.replication.throttled.rate", "1000", False, None),
        ("listener.name.plaintext.ssl.keystore.location", "/x", True, None),
        ("sasl.kerberos.min.time.before.relogin", "58000", False, "default cluster level"),
        ("listener.name.plaintext.ssl.keystore.location", "/x", False, "default cluster level"),
        ("ssl.keystore.location", "/x", True, "only per-listener"),
        ("auto.create.topics.enable", "false", True, "Cannot update these configs dynamically"),
        ("num.io.threads", "0", True, "at least 1"),
        ("no.such.config", "1", True, None),
        ("no.such.config", "1", False, None),
    ],
)
def test_dynamic_update_rules_are_kafkas(
    key: str, value: str, per_broker: bool, refusal: str | None
) -> None:
    why = DynamicBrokerConfig.check(key, value, per_broker)
    if refusal is None:
        assert why is None
    else:
        assert why is not None and refusal in why
    assert BROKER_SYNONYMS["log.retention.ms"] == "retention.ms"


def test_group_consumer_migration_policy_values() -> None:
    config = BrokerConfig({"group.consumer.migration.policy": "Upgrade"})
    assert GroupConfig.from_config(config).consumer_migration_policy == "upgrade"
    with pytest.raises(ConfigError, match="group.consumer.migration.policy must be one of"):
        BrokerConfig({"group.consumer.migration.policy": "sideways"})
