"""Fixtures: certificates made for this run, and a broker with every kind of listener.

``secured`` listens on PLAINTEXT, SSL (server certificate only), MTLS (SSL with client
certificates required, subjects mapped to user names), SASL_PLAINTEXT and SASL_SSL (PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512). It runs the standard authorizer with
``allow.everyone.if.no.acl.found=true`` and ``User:admin`` as super user, so a topic with
ACLs tells which principal a connection authenticated as.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.secure import (
    PLAIN_JAAS,
    Listeners,
    Login,
    create_scram_users,
    jaas,
    standard_pki,
)

PASSWORDS = {"alice": "alice-secret", "admin": "admin-secret", "carol": "carol-secret"}
LISTENERS = {
    "PLAINTEXT": "PLAINTEXT",
    "SSL": "SSL",
    "MTLS": "SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "SASL_SSL": "SASL_SSL",
}
MAPPING = r"RULE:^CN=([^,]+),O=Moldau Tests,C=CZ$/$1/L,DEFAULT"
_numbers = itertools.count()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return standard_pki(tmp_path_factory.mktemp("pki"))


def broker_configs(certs: dict[str, Any], **extra: str) -> dict[str, str]:
    plain = jaas(PLAIN_JAAS, **{f"user_{u}": p for u, p in PASSWORDS.items()})
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs["broker"].keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs["pki"].ca_file),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": MAPPING,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
        **extra,
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: dict[str, Any]) -> Iterator[Listeners]:
    broker = Listeners(tmp_path_factory.mktemp("secured"), LISTENERS, broker_configs(certs)).start()
    try:
        create_scram_users(broker.bootstrap("PLAINTEXT"), {}, PASSWORDS)
        yield broker
    finally:
        broker.close()


def logins(certs: dict[str, Any]) -> dict[str, Login]:
    ca = certs["pki"].ca_file
    return {
        "plaintext": Login("PLAINTEXT", "PLAINTEXT"),
        "ssl": Login("SSL", "SSL", ca),
        "mtls": Login("MTLS", "SSL", ca, certs["alice"]),
        "sasl-plain": Login("SASL_PLAINTEXT", "SASL_PLAINTEXT", None, None, "PLAIN", "alice", PASSWORDS["alice"]),
        "sasl-scram256": Login("SASL_PLAINTEXT", "SASL_PLAINTEXT", None, None, "SCRAM-SHA-256", "alice", PASSWORDS["alice"]),
        "sasl-ssl-plain": Login("SASL_SSL", "SASL_SSL", ca, None, "PLAIN", "alice", PASSWORDS["alice"]),
        "sasl-ssl-scram512": Login("SASL_SSL", "SASL_SSL", ca, None, "SCRAM-SHA-512", "alice", PASSWORDS["alice"]),
    }  # fmt: skip


@pytest.fixture(scope="module")
def login(certs: dict[str, Any]) -> dict[str, Login]:
    return logins(certs)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return f"{safe[:150]}-{next(_numbers)}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "broker"
