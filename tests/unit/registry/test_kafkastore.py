"""Confluent's `kafkastore.*` client keys as librdkafka properties."""

from __future__ import annotations

import pytest

from moldau.registry.kafkastore import KafkastoreConfigError, client_properties, split_properties

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="registry" password="s3cret";'
)


def test_sasl_ssl_with_pem_files() -> None:
    props, store = split_properties(
        {
            "client.id": "x",
            "kafkastore.security.protocol": "sasl_ssl",
            "kafkastore.sasl.mechanism": "SCRAM-SHA-512",
            "kafkastore.sasl.jaas.config": SCRAM_JAAS,
            "kafkastore.ssl.truststore.type": "PEM",
            "kafkastore.ssl.truststore.location": "/ca.pem",
            "kafkastore.ssl.keystore.type": "PEM",
            "kafkastore.ssl.keystore.location": "/me.pem",
            "kafkastore.ssl.endpoint.identification.algorithm": "",
        }
    )
    assert props == {"client.id": "x"}
    assert client_properties(store.get) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "registry",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/me.pem",
        "ssl.key.location": "/me.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert client_properties({}.get) == {"security.protocol": "PLAINTEXT"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "x"}, "sasl.jaas.config"),
        (
            {
                "security.protocol": "SSL",
                "ssl.truststore.location": "/t.jks",
                "ssl.truststore.type": "JKS",
            },
            "ssl.truststore.type=JKS",
        ),
    ],
)
def test_unusable_settings_say_which_key(settings: dict[str, str], message: str) -> None:
    with pytest.raises(KafkastoreConfigError, match=message):
        client_properties(settings.get)
