"""Every Kafka broker config is known: dynamic ones are altered per broker and cluster-wide,
stored in the metadata log and described back with their source; read-only ones are
refused as Kafka refuses them. Driven by librdkafka (confluent-kafka: the case of its test
0081) and the Java Admin client (kafka-clients 3.9)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from moldau.testing import BrokerProcess
from tests.integration.helpers import DEADLINE_S, admin, create_topic
from tests.java.client import JavaClient

NODE = "1"  # the test broker's node.id
RELOGIN = "sasl.kerberos.min.time.before.relogin"  # Kafka: per-broker, not acted on by Moldau


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> AdminClient:
    return admin(broker.bootstrap)


def describe_broker(client: AdminClient, name: str = NODE) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.BROKER, name)
    return client.describe_configs([resource])[resource].result(timeout=DEADLINE_S)


def incremental(
    client: AdminClient,
    kind: ResourceType,
    name: str,
    *ops: tuple[str, AlterConfigOpType, str | None],
) -> None:
    entries = [ConfigEntry(n, v, incremental_operation=op) for n, op, v in ops]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    client.incremental_alter_configs([resource])[resource].result(timeout=DEADLINE_S)


def test_librdkafka_0081_alter_broker_config(broker: BrokerProcess, client: AdminClient) -> None:
    """librdkafka's 0081: legacy AlterConfigs on one broker with a per-broker key."""
    resource = ConfigResource(ResourceType.BROKER, NODE, set_config={RELOGIN: "58000"})
    client.alter_configs([resource])[resource].result(timeout=DEADLINE_S)
    entry = describe_broker(client)[RELOGIN]
    assert (entry.value, entry.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not entry.is_read_only

    incremental(client, ResourceType.BROKER, NODE, (RELOGIN, AlterConfigOpType.SET, "59000"))
    assert describe_broker(client)[RELOGIN].value == "59000"
    incremental(client, ResourceType.BROKER, NODE, (RELOGIN, AlterConfigOpType.DELETE, None))
    entry = describe_broker(client)[RELOGIN]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DEFAULT_CONFIG.value)


def test_read_only_and_invalid_are_refused(broker: BrokerProcess, client: AdminClient) -> None:
    refusals = [
        ("auto.create.topics.enable", "false", "Cannot update these configs dynamically"),
        ("ssl.keystore.location", "/x", "only per-listener"),
        ("num.io.threads", "0", "at least 1"),
    ]
    for key, value, why in refusals:
        with pytest.raises(KafkaException) as e:
            incremental(client, ResourceType.BROKER, NODE, (key, AlterConfigOpType.SET, value))
        assert e.value.args[0].name() == "INVALID_REQUEST" and why in e.value.args[0].str(), key
    assert describe_broker(client)["num.io.threads"].source == ConfigSource.DEFAULT_CONFIG.value


def test_custom_broker_keys_are_kept_for_plugins(
    broker: BrokerProcess, client: AdminClient, topic: str
) -> None:
    """Kafka stores a broker key it does not define (a plugin's) and describes it back; it
    refuses APPEND on it and refuses the key on a topic."""
    key = "my.plugin.endpoint"
    incremental(client, ResourceType.BROKER, NODE, (key, AlterConfigOpType.SET, "http://x"))
    entry = describe_broker(client)[key]
    assert (entry.value, entry.source) == ("http://x", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    with pytest.raises(KafkaException) as e:
        incremental(client, ResourceType.BROKER, NODE, (key, AlterConfigOpType.APPEND, "y"))
    assert e.value.args[0].name() == "INVALID_CONFIG"
    incremental(client, ResourceType.BROKER, NODE, (key, AlterConfigOpType.DELETE, None))
    assert key not in describe_broker(client)
    create_topic(broker.bootstrap, topic, 1)
    with pytest.raises(KafkaException) as e:
        incremental(client, ResourceType.TOPIC, topic, (key, AlterConfigOpType.SET, "x"))
    assert e.value.args[0].name() == "INVALID_CONFIG"


def test_empty_cleanup_policy(broker: BrokerProcess, client: AdminClient, topic: str) -> None:
    """confluent-kafka-python's test_incremental_alter_configs: subtracting ``delete``
    leaves the empty policy Kafka 4 accepts."""
    create_topic(broker.bootstrap, topic, 1)
    incremental(
        client, ResourceType.TOPIC, topic, ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete")
    )
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = client.describe_configs([resource])[resource].result(timeout=DEADLINE_S)
    assert configs["cleanup.policy"].value == ""
    incremental(
        client, ResourceType.TOPIC, topic, ("cleanup.policy", AlterConfigOpType.APPEND, "compact")
    )
    configs = client.describe_configs([resource])[resource].result(timeout=DEADLINE_S)
    assert configs["cleanup.policy"].value == "compact"


def test_java_admin_broker_configs(broker: BrokerProcess, java: JavaClient) -> None:
    """Admin.incrementalAlterConfigs on a broker and the broker default; describeConfigs
    with sources and synonyms, before and after a restart (the values are ConfigRecords)."""
    result = java.admin(
        broker.bootstrap,
        ["alter-configs", "--broker", NODE, "--set", f"{RELOGIN}=61000",
         "--set", "log.cleaner.threads=2"],
        ["alter-configs", "--broker", "default", "--set", "log.cleaner.threads=3",
         "--set", "background.threads=7"],
        ["alter-configs", "--broker", NODE, "--set", "broker.rack=r9"],
        ["alter-configs", "--broker", "default", "--set", f"{RELOGIN}=61000"],
    )  # fmt: skip
    assert [e["event"] for e in result.events] == ["alter-configs"] * 2 + ["error"] * 2
    assert "Cannot update these configs dynamically" in str(result.events[2])
    assert "broker id must be specified" in str(result.events[3])

    def check() -> None:
        configs = java.admin(broker.bootstrap, ["describe-configs", "--broker", NODE]).check()
        entries = configs.one("describe-configs")["configs"]
        cleaner = entries["log.cleaner.threads"]
        assert (cleaner["value"], cleaner["source"]) == ("2", "DYNAMIC_BROKER_CONFIG")
        assert [(s["value"], s["source"]) for s in cleaner["synonyms"]] == [
            ("2", "DYNAMIC_BROKER_CONFIG"),
            ("3", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ]
        background = entries["background.threads"]
        assert (background["value"], background["source"]) == (
            "7",
            "DYNAMIC_DEFAULT_BROKER_CONFIG",
        )
        assert entries[RELOGIN]["value"] == "61000"
        io = entries["num.io.threads"]  # Kafka's default, not acted on: still described
        assert (io["value"], io["source"], io["read_only"]) == ("8", "DEFAULT_CONFIG", False)
        assert entries["ssl.keystore.password"]["sensitive"]
        assert entries["auto.create.topics.enable"]["read_only"]

    check()
    default = java.admin(broker.bootstrap, ["describe-configs", "--broker", "default"]).check()
    assert {k: e["value"] for k, e in default.one("describe-configs")["configs"].items()} == {
        "background.threads": "7",
        "log.cleaner.threads": "3",
    }
    broker.restart()
    check()
    java.admin(
        broker.bootstrap,
        ["alter-configs", "--broker", NODE, "--delete", RELOGIN, "--delete", "log.cleaner.threads"],
        ["alter-configs", "--broker", "default", "--delete", "log.cleaner.threads",
         "--delete", "background.threads"],
    ).check()  # fmt: skip
