"""Re-authentication (KIP-368, ``connections.max.reauth.ms``): the session lifetime is
sent to the client, a client that re-authenticates keeps its connection across several
lifetimes, one that does not is disconnected once its session ends. Also the node-to-node
``NetworkClient`` over TLS and SASL, renewing its login before the session ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.security.client import ClientSecurity
from moldau.security.listeners import SecurityProtocol
from moldau.security.tls import client_context
from tests.integration.helpers import DEADLINE_S, encode_request, framed
from tests.java.client import java_client
from tests.security.conftest import LISTENERS, PASSWORDS, broker_configs
from tests.security.raw import SaslRawClient
from tests.security.secure import Listeners, Login, create_scram_users

LIFETIME_MS = 2000


@pytest.fixture(scope="module")
def reauth(tmp_path_factory: pytest.TempPathFactory, certs: dict[str, Any]) -> Iterator[Listeners]:
    configs = broker_configs(certs, **{"connections.max.reauth.ms": str(LIFETIME_MS)})
    broker = Listeners(tmp_path_factory.mktemp("reauth"), LISTENERS, configs).start()
    try:
        create_scram_users(broker.bootstrap("PLAINTEXT"), {}, PASSWORDS)
        yield broker
    finally:
        broker.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sessions_end_without_reauthentication(reauth: Listeners, version: int) -> None:
    with SaslRawClient(reauth.bootstrap("SASL_PLAINTEXT")) as raw:
        done = raw.login("SCRAM-SHA-256", "alice", "alice-secret", version)
        assert done.error_code == ErrorCode.NONE
        if version >= 1:
            assert done.session_lifetime_ms == LIFETIME_MS
        assert raw.request(MetadataRequest(topics=None), 12).brokers
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        mark = reauth.process.lines_seen
        raw.send_bytes(framed(encode_request(MetadataRequest(topics=None), 12)))
        assert raw.is_closed_by_peer()
    assert "session expired" in reauth.lines(mark)


def test_reauthenticating_in_time_keeps_the_connection(reauth: Listeners) -> None:
    with SaslRawClient(reauth.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.login("PLAIN", "alice", "alice-secret").session_lifetime_ms == LIFETIME_MS
        for _ in range(3):
            time.sleep(LIFETIME_MS / 1000 * 0.6)
            assert raw.login("PLAIN", "alice", "alice-secret").error_code == ErrorCode.NONE
            assert raw.request(MetadataRequest(topics=None), 12).brokers
        # Re-authenticating as someone else is refused, and ends the connection.
        assert (
            raw.login("PLAIN", "carol", "carol-secret").error_code
            == ErrorCode.SASL_AUTHENTICATION_FAILED
        )
        assert raw.is_closed_by_peer()


def paced_confluent(bootstrap: str, login: Login, topic: str, seconds: float) -> int:
    """Produce one record every 100 ms for ``seconds`` on one connection; the count acked."""
    errors: list[str] = []
    acked: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "error_cb": lambda e: errors.append(str(e)), **login.librdkafka()})  # fmt: skip
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        producer.produce(
            topic, b"v%d" % sent, on_delivery=lambda e, m: e or acked.append(m.offset())
        )
        sent += 1
        producer.poll(0.1)
    assert producer.flush(DEADLINE_S) == 0 and not errors, errors
    assert len(acked) == sent
    return sent


def test_clients_reauthenticate_across_lifetimes(
    reauth: Listeners, login: dict[str, Login], topic: str
) -> None:
    mark = reauth.process.lines_seen
    sent = paced_confluent(
        reauth.bootstrap("SASL_SSL"), login["sasl-ssl-scram512"], topic, 3 * LIFETIME_MS / 1000
    )
    assert sent >= 25
    java = java_client()
    if java is not None:
        result = java.run(
            "produce", "--bootstrap", reauth.bootstrap("SASL_PLAINTEXT"), "--topic", topic,
            "--count", "60", "--throughput", "10", *login["sasl-plain"].java(),
        ).check()  # fmt: skip
        assert len(result.of("ack")) == 60
    assert "session expired" not in reauth.lines(mark)


def test_network_client_over_sasl_ssl(reauth: Listeners, certs: dict[str, Any]) -> None:
    """The node-to-node client: TLS with the server's name checked, SCRAM, and a fresh
    login (a new connection) before each session ends; a wrong password or an untrusted
    server are ConnectionErrors."""
    host, port = reauth.bootstrap("SASL_SSL").split(":")
    destination = (host, int(port))
    ca = str(certs["pki"].ca_file)
    tls = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}.get)
    good = ClientSecurity(SecurityProtocol.SASL_SSL, tls, "SCRAM-SHA-512", "alice", "alice-secret")
    mark = reauth.process.lines_seen

    async def run() -> None:
        client = NetworkClient("node-1", security=good)
        connections = set()
        end = time.monotonic() + 2.5 * LIFETIME_MS / 1000
        while time.monotonic() < end:
            response = await client.send(destination, MetadataRequest(topics=None), 12)
            assert response.brokers[0].port == int(port)
            connections.add(id(client._connections[destination]))
            await asyncio.sleep(0.1)
        assert len(connections) >= 2, "the login was never renewed"
        client.close()
        bad = NetworkClient("node-1", security=ClientSecurity(
            SecurityProtocol.SASL_SSL, tls, "SCRAM-SHA-512", "alice", "wrong"))  # fmt: skip
        with pytest.raises(ConnectionError, match="SASL_AUTHENTICATION_FAILED"):
            await bad.send(destination, ApiVersionsRequest(), 3)
        bad.close()
        other = client_context(
            {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs["pki"].dir / "rogue" / "rogue.crt"),
            }.get
        )
        untrusting = NetworkClient("node-1", security=ClientSecurity(SecurityProtocol.SSL, other))
        with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.send(destination, ApiVersionsRequest(), 3)
        untrusting.close()

    asyncio.run(run())
    assert "session expired" not in reauth.lines(mark)


def test_client_security_from_broker_config(tmp_path: Path, certs: dict[str, Any]) -> None:
    from moldau.config.broker import BrokerConfig

    config = BrokerConfig({
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.internal.scram-sha-256.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="pw";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs["pki"].ca_file),
    })  # fmt: skip
    security = ClientSecurity.inter_broker(config)
    assert (security.protocol, security.mechanism, security.username) == (
        SecurityProtocol.SASL_SSL, "SCRAM-SHA-256", "broker")  # fmt: skip
    assert security.ssl_context is not None and security.ssl_context.check_hostname
