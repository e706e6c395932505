"""The registry's own Kafka client settings, given as Confluent's registry takes them: Kafka's
Java client keys under `kafkastore.` (`kafkastore.security.protocol`,
`kafkastore.sasl.mechanism`, `kafkastore.sasl.jaas.config`, `kafkastore.ssl.*`), turned
into the librdkafka properties the store's clients (and, through them, the election's) use.

Certificates are PEM files (`ssl.truststore.type`/`ssl.keystore.type` PEM; a PEM keystore
holds the key and its certificate chain), which both librdkafka and Python's `ssl` read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from moldau.security.jaas import JaasError, parse_jaas

PREFIX = "kafkastore."


class KafkastoreConfigError(ValueError):
    """Settings the registry's client cannot use, worded for the user."""


def client_properties(get: Callable[[str], str | None], prefix: str = PREFIX) -> dict[str, str]:
    """librdkafka properties from the Java client keys `get` answers (None: not set);
    `prefix` names the keys in messages."""
    protocol = (get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise KafkastoreConfigError(f"{prefix}security.protocol={protocol} is not supported")
    props = {"security.protocol": protocol}
    if protocol.startswith("SASL"):
        props["sasl.mechanism"] = (get("sasl.mechanism") or "GSSAPI").strip().upper()
        jaas_text = get("sasl.jaas.config")
        if jaas_text:
            try:
                options = parse_jaas(jaas_text).options
            except JaasError as e:
                raise KafkastoreConfigError(f"{prefix}sasl.jaas.config: {e}") from None
            if "username" not in options or "password" not in options:
                raise KafkastoreConfigError(
                    f'{prefix}sasl.jaas.config must give username="..." and password="..."'
                )
            props["sasl.username"] = options["username"]
            props["sasl.password"] = options["password"]
    if protocol.endswith("SSL"):
        props.update(_tls(get, prefix))
    return props


def _tls(get: Callable[[str], str | None], prefix: str) -> dict[str, str]:
    props = {}
    for store in ("truststore", "keystore"):
        location = get(f"ssl.{store}.location")
        if not location:
            continue
        kind = (get(f"ssl.{store}.type") or "PEM").strip().upper()
        if kind != "PEM":
            raise KafkastoreConfigError(
                f"{prefix}ssl.{store}.type={kind}: the registry's client reads PEM files only"
            )
        if store == "truststore":
            props["ssl.ca.location"] = location
        else:
            props["ssl.certificate.location"] = props["ssl.key.location"] = location
    password = get("ssl.key.password")
    if password:
        props["ssl.key.password"] = password
    algorithm = get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        props["ssl.endpoint.identification.algorithm"] = algorithm.strip().lower() or "none"
    return props


def split_properties(properties: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(librdkafka properties, `kafkastore.`-keys without the prefix) of a mixed set."""
    plain = {k: v for k, v in properties.items() if not k.startswith(PREFIX)}
    store = {k[len(PREFIX) :]: v for k, v in properties.items() if k.startswith(PREFIX)}
    return plain, store
