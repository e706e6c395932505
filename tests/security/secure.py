"""Brokers with several listeners and the client settings that reach each of them.

:class:`Listeners` starts a broker (``moldau.testing.BrokerProcess``) with named
listeners and knows their ports. :class:`Login` is one way to connect (a listener, a SASL
mechanism and user, a client certificate), rendered for each client library:
:meth:`Login.librdkafka` (confluent-kafka, kcat), :meth:`Login.kafka_python`,
:meth:`Login.aiokafka`, :meth:`Login.java` (``--config`` pairs for MoldauClient).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from moldau.testing import BrokerProcess
from tests.integration.helpers import confluent_consumer
from tests.security.certs import Issued, Pki

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(module: str, **options: str) -> str:
    return module + " required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


class Listeners:
    """A broker whose ``listeners`` are ``names`` (each on a free port)."""

    def __init__(self, data_dir: Path, names: dict[str, str], configs: dict[str, str]) -> None:
        self.names = list(names)
        self.process = BrokerProcess(
            data_dir,
            {
                "listeners": ",".join(f"{n}://127.0.0.1:0" for n in names),
                "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in names.items()),
                "inter.broker.listener.name": self.names[0],
                "offsets.topic.num.partitions": "1",
                "group.initial.rebalance.delay.ms": "0",
                **configs,
            },
        )
        self.ports: dict[str, int] = {}

    def start(self) -> Listeners:
        self.process.start()
        deadline = time.monotonic() + 10
        while len(self.ports) < len(self.names):
            assert time.monotonic() < deadline, "not every listener reported its port"
            self.process.settle_output()
            found = [int(m[2]) for m in map(_LISTENING.search, self.process.output) if m]
            self.ports = dict(zip(self.names, found, strict=False))
        return self

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def lines(self, since: int = 0) -> str:
        self.process.settle_output()
        return "\n".join(self.process.output_since(since))

    def close(self) -> None:
        self.process.close()


@dataclass(frozen=True)
class Login:
    listener: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ca: Path | None = None
    cert: Issued | None = None
    mechanism: str | None = None
    user: str = ""
    password: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def as_user(self, user: str, password: str) -> Login:
        return replace(self, user=user, password=password)

    @property
    def tls(self) -> bool:
        return "SSL" in self.protocol

    def librdkafka(self) -> dict[str, str]:
        out = {"security.protocol": self.protocol, **self.extra}
        if self.tls:
            assert self.ca is not None
            out["ssl.ca.location"] = str(self.ca)
        if self.cert is not None:
            out["ssl.certificate.location"] = str(self.cert.cert)
            out["ssl.key.location"] = str(self.cert.key)
        if self.mechanism:
            out |= {"sasl.mechanisms": self.mechanism, "sasl.username": self.user,
                    "sasl.password": self.password}  # fmt: skip
        return out

    def kafka_python(self) -> dict[str, Any]:
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            out["ssl_cafile"] = str(self.ca)
        if self.cert is not None:
            out |= {"ssl_certfile": str(self.cert.cert), "ssl_keyfile": str(self.cert.key)}
        if self.mechanism:
            out |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                    "sasl_plain_password": self.password}  # fmt: skip
        return out

    def aiokafka(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            out["ssl_context"] = create_ssl_context(
                cafile=str(self.ca),
                certfile=str(self.cert.cert) if self.cert else None,
                keyfile=str(self.cert.key) if self.cert else None,
            )
        if self.mechanism:
            out |= {"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                    "sasl_plain_password": self.password}  # fmt: skip
        return out

    def java(self) -> list[str]:
        props = {"security.protocol": self.protocol}
        if self.tls:
            props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}
        if self.cert is not None:
            props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.cert.keystore)}
        if self.mechanism:
            module = PLAIN_JAAS if self.mechanism == "PLAIN" else SCRAM_JAAS
            props |= {
                "sasl.mechanism": self.mechanism,
                "sasl.jaas.config": jaas(module, username=self.user, password=self.password),
            }
        return [arg for k, v in props.items() for arg in ("--config", f"{k}={v}")]


def watermarks(bootstrap: str, login: Login, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (log start, high watermark), asked through ``login``."""
    consumer = confluent_consumer(bootstrap, **login.librdkafka())
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for p in partitions
        }
    finally:
        consumer.close()


def create_scram_users(bootstrap: str, login: dict[str, str], users: dict[str, str]) -> None:
    """SCRAM-SHA-256 and -512 credentials for ``users`` (AlterUserScramCredentials through
    confluent-kafka, which salts and hashes the password on the client)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **login})
    alterations = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for user, password in users.items()
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    # One alteration per user and request: Kafka refuses a user altered twice at once.
    for alteration in alterations:
        for future in admin.alter_user_scram_credentials([alteration]).values():
            try:
                future.result(timeout=30)
            except KafkaException as e:
                raise AssertionError(f"cannot create SCRAM user {alteration.user}: {e}") from None


def standard_pki(directory: Path) -> dict[str, Any]:
    """A CA, the broker's certificate, clients' ones, an expired one and one from a CA
    the broker does not trust."""
    pki = Pki(directory)
    rogue = Pki(directory / "rogue", "rogue")
    return {
        "pki": pki,
        "broker": pki.issue("broker", "localhost", server=True),
        "alice": pki.issue("alice", "alice"),
        "bob": pki.issue("bob", "bob", org="Other Org"),
        "expired": pki.issue("expired", "alice", expired=True),
        "rogue": rogue.issue("rogue", "alice"),
    }
