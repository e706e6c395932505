"""Every listener type with real clients: records produced over TLS, mutual TLS, SASL
PLAIN and SCRAM (with and without TLS) come back byte for byte; the principal a
connection gets (certificate subject through the mapping rules, SASL user) is the one
ACLs see."""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.helpers import (
    KCAT_HEADER,
    assert_log_matches,
    confluent_consumer,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    make_records,
    produce_aiokafka,
    produce_confluent,
    produce_kafka_python,
    produce_kcat,
)
from tests.security.secure import Listeners, Login, watermarks

PARTITIONS = 2
CASES = [
    *(("confluent", name) for name in
      ("plaintext", "ssl", "mtls", "sasl-plain", "sasl-scram256", "sasl-ssl-plain", "sasl-ssl-scram512")),
    *((client, name) for client in ("kafka-python", "aiokafka", "kcat", "java")
      for name in ("mtls", "sasl-plain", "sasl-ssl-scram512")),
    ("kafka-python", "sasl-scram256"),
    ("java", "ssl"),
]  # fmt: skip


def create_topic(broker: Listeners, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def roundtrip(client: str, broker: Listeners, login: Login, topic: str, java: Any) -> None:
    bootstrap = broker.bootstrap(login.listener)
    records = make_records(120, seed=11, text=client == "kcat", headers=client != "kcat")
    acked = None
    if client == "confluent":
        acked = produce_confluent(bootstrap, topic, records, "lz4", **login.librdkafka())
        consumed = consume_confluent(
            bootstrap, topic, watermarks(bootstrap, login, topic), **login.librdkafka()
        )
    elif client == "kafka-python":
        acked = produce_kafka_python(bootstrap, topic, records, "gzip", **login.kafka_python())
        consumed = consume_kafka_python(
            bootstrap, topic, watermarks(bootstrap, login, topic), **login.kafka_python()
        )
    elif client == "aiokafka":
        acked = produce_aiokafka(bootstrap, topic, records, "none", **login.aiokafka())
        consumed = consume_aiokafka(
            bootstrap, topic, watermarks(bootstrap, login, topic), **login.aiokafka()
        )
    elif client == "kcat":
        records = [dataclasses.replace(r, headers=(KCAT_HEADER,)) for r in records]
        produce_kcat(bootstrap, topic, records, "zstd", **login.librdkafka())
        consumed = consume_kcat(bootstrap, topic, **login.librdkafka())
    else:
        acked = java.produce(bootstrap, topic, records, "snappy", *login.java())
        consumed = java.consume(bootstrap, topic, *login.java())
    assert_log_matches(records, consumed, acked=acked)


@pytest.mark.parametrize(("client", "name"), CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_clients_on_every_listener(
    secured: Listeners,
    login: dict[str, Login],
    topic: str,
    client: str,
    name: str,
    request: pytest.FixtureRequest,
) -> None:
    if client == "kcat" and shutil.which("kcat") is None:
        pytest.skip("kcat is not installed")
    java = request.getfixturevalue("java") if client == "java" else None
    create_topic(secured, topic)
    roundtrip(client, secured, login[name], topic, java)


def allow_only(broker: Listeners, topic: str, principal: str) -> None:
    """ACLs on ``topic`` for ``principal`` alone: everyone else is now denied it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})  # fmt: skip
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)  # fmt: skip
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)


def can_describe(broker: Listeners, login: Login, topic: str) -> bool:
    consumer = confluent_consumer(broker.bootstrap(login.listener), **login.librdkafka())
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is None:
            return True
        assert meta.error.name() == "TOPIC_AUTHORIZATION_FAILED", meta.error
        return False
    finally:
        consumer.close()


def test_principals_are_what_acls_see(
    secured: Listeners, login: dict[str, Login], certs: dict[str, Any], topic: str
) -> None:
    create_topic(secured, topic)
    allow_only(secured, topic, "User:alice")
    # The certificate subject CN=alice,O=Moldau Tests,C=CZ maps to alice (the rule's $1, lower
    # case); bob's subject has another organisation, so DEFAULT keeps the whole DN.
    assert can_describe(secured, login["mtls"], topic)
    bob = dataclasses.replace(login["mtls"], cert=certs["bob"])
    assert not can_describe(secured, bob, topic)
    assert can_describe(secured, login["sasl-scram256"], topic)
    assert can_describe(secured, login["sasl-ssl-plain"], topic)
    assert not can_describe(secured, login["sasl-plain"].as_user("carol", "carol-secret"), topic)
    assert not can_describe(secured, login["plaintext"], topic)  # User:ANONYMOUS
    assert not can_describe(secured, login["ssl"], topic)  # TLS without a certificate
    allow_only(secured, topic, "User:CN=bob,O=Other Org,C=CZ")
    assert can_describe(secured, bob, topic)
