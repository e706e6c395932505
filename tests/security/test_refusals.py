"""Clients that must not get in: each is refused clearly (the client's error says why,
the broker logs "Failed authentication with ..."), and the broker keeps serving others."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.security.plain import plain_token
from moldau.security.scram import SCRAM_SHA_256, ScramClient
from tests.integration.helpers import (
    assert_log_matches,
    consume_confluent,
    encode_request,
    framed,
    make_records,
    produce_confluent,
)
from tests.java.client import java_client
from tests.security.raw import SaslRawClient
from tests.security.secure import Listeners, Login, watermarks


def refused(bootstrap: str, props: dict[str, str], timeout: float = 6.0) -> list[str]:
    """What confluent-kafka reports (its error callback) while it fails to get metadata
    through ``props``."""
    errors: list[str] = []
    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "error_cb": lambda e: errors.append(str(e)), **props}
    )
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    try:
        admin.list_topics(timeout=1)
    except KafkaException as e:  # the client gives up: that is the point
        errors.append(str(e))
    else:
        raise AssertionError(f"{props} got metadata")
    return errors


def still_serves(broker: Listeners, login: Login, topic: str) -> None:
    bootstrap = broker.bootstrap(login.listener)
    records = make_records(30, seed=3)
    acked = produce_confluent(bootstrap, topic, records, **login.librdkafka())
    assert_log_matches(
        records,
        consume_confluent(
            bootstrap, topic, watermarks(bootstrap, login, topic), **login.librdkafka()
        ),
        acked=acked,
    )


CASES = {
    # name: (login, how to break it, what the client says, what the broker logs)
    "plain-wrong-password": ("sasl-plain", {"sasl.password": "nope"},
                             "Invalid username or password", "Invalid username or password (user 'alice')"),
    "plain-unknown-user": ("sasl-ssl-plain", {"sasl.username": "mallory"},
                           "Invalid username or password", "Invalid username or password (user 'mallory')"),
    "scram-wrong-password": ("sasl-scram256", {"sasl.password": "nope"},
                             "invalid credentials with SASL mechanism SCRAM-SHA-256",
                             "invalid password for user 'alice'"),
    "scram-unknown-user": ("sasl-ssl-scram512", {"sasl.username": "mallory"},
                           "invalid credentials with SASL mechanism SCRAM-SHA-512",
                           "unknown user 'mallory'"),
    "plaintext-client-on-ssl": ("ssl", {"security.protocol": "PLAINTEXT"}, "",
                                "SSL handshake failed"),
    # The broker closes at once: the client reports a failed handshake or a reset.
    "ssl-client-on-plaintext": ("plaintext", {"security.protocol": "SSL"}, "",
                                "looks like a TLS handshake"),
    "no-sasl-on-sasl-port": ("sasl-plain", {"security.protocol": "PLAINTEXT"}, "",
                             "during SASL handshake"),
    "sasl-mechanism-not-enabled": ("sasl-plain", {"sasl.mechanisms": "SCRAM-SHA-1"}, "", ""),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bad_logins_are_refused(
    secured: Listeners, login: dict[str, Login], topic: str, case: str
) -> None:
    name, override, client_says, broker_logs = CASES[case]
    good = login[name]
    mark = secured.process.lines_seen
    props = good.librdkafka() | override
    if override.get("security.protocol") == "SSL":
        props["ssl.ca.location"] = str(login["ssl"].ca)
    errors = refused(secured.bootstrap(good.listener), props)
    assert any(client_says in e for e in errors), errors
    if broker_logs:
        log = secured.lines(mark)
        assert broker_logs in log, log
    still_serves(secured, good, topic)


CERT_CASES = {
    "expired": ("expired", "certificate has expired"),
    "other-ca": ("rogue", "certificate verify failed"),
    "none": (None, "peer did not return a certificate"),
}


@pytest.mark.parametrize("case", list(CERT_CASES))
def test_bad_client_certificates_are_refused(
    secured: Listeners, login: dict[str, Login], certs: dict[str, Any], topic: str, case: str
) -> None:
    cert, reason = CERT_CASES[case]
    mark = secured.process.lines_seen
    bad = dataclasses.replace(login["mtls"], cert=certs[cert] if cert else None)
    # TLS 1.3 clients learn of the refusal after their side of the handshake: a disconnect.
    errors = refused(secured.bootstrap("MTLS"), bad.librdkafka())
    assert any("Failed to get metadata" in e for e in errors), errors
    log = secured.lines(mark)
    assert (
        "Failed authentication with 127.0.0.1 (SSL handshake failed" in log
        and reason in log.lower()
    ), log
    still_serves(secured, login["mtls"], topic)


def test_java_wrong_password(secured: Listeners, login: dict[str, Login], topic: str) -> None:
    java = java_client()
    if java is None:
        pytest.skip("no JDK found (javac)")
    bad = login["sasl-ssl-scram512"].as_user("alice", "wrong")
    result = java.admin(secured.bootstrap("SASL_SSL"), ["describe-cluster", *bad.java()])
    assert result.returncode != 0
    assert "SaslAuthenticationException" in str(result) and "SCRAM-SHA-512" in str(result), result
    still_serves(secured, login["sasl-ssl-scram512"], topic)


def test_requests_before_login_close_the_connection(secured: Listeners) -> None:
    mark = secured.process.lines_seen
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        raw.send_bytes(framed(encode_request(MetadataRequest(topics=None), 12)))
        assert raw.is_closed_by_peer()
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in secured.lines(mark)
    # Before logging in, frames are limited to sasl.server.max.receive.size (512 KiB).
    mark = secured.process.lines_seen
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        raw.send_bytes((1 << 20).to_bytes(4, "big"))
        assert raw.is_closed_by_peer()
    assert "sasl.server.max.receive.size" in secured.lines(mark)


def test_legacy_handshake_then_bare_tokens(secured: Listeners) -> None:
    """SaslHandshake v0: the tokens follow as bare size-prefixed frames (PLAIN and SCRAM),
    a failed one closes the connection without an answer."""
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.handshake("PLAIN", version=0).error_code == 0
        assert raw.bare_token(plain_token("alice", "alice-secret")) == b""
        metadata = raw.request(MetadataRequest(topics=None), 12)
        assert metadata.brokers and metadata.brokers[0].port == secured.ports["SASL_PLAINTEXT"]
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.handshake("SCRAM-SHA-256", version=0).error_code == 0
        scram = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
        server_first = raw.bare_token(scram.first())
        assert server_first is not None
        server_final = raw.bare_token(scram.final(server_first))
        assert server_final is not None
        scram.verify(server_final)
        assert raw.request(MetadataRequest(topics=None), 12).brokers
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.handshake("PLAIN", version=0).error_code == 0
        assert raw.bare_token(plain_token("alice", "wrong")) is None  # closed, no answer


def test_kafka_framed_failures(secured: Listeners) -> None:
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        response = raw.handshake("GSSAPI")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.is_closed_by_peer()
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        response = raw.login("SCRAM-SHA-512", "alice", "wrong")
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in response.error_message
        assert raw.is_closed_by_peer()
    # On a listener without SASL the SASL requests are answered ILLEGAL_SASL_STATE.
    with SaslRawClient(secured.bootstrap("PLAINTEXT")) as raw:
        assert raw.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.authenticate(b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.request(MetadataRequest(topics=None), 12).brokers


def test_many_failures_leave_the_broker_serving(
    secured: Listeners, login: dict[str, Login], topic: str
) -> None:
    start = time.monotonic()
    for _ in range(30):
        with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
            assert (
                raw.login("PLAIN", "alice", "wrong").error_code
                == ErrorCode.SASL_AUTHENTICATION_FAILED
            )
    assert time.monotonic() - start < 30
    still_serves(secured, login["sasl-ssl-scram512"], topic)
