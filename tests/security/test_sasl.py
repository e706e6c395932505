"""SASL step by step: SCRAM and PLAIN exchanges, the JAAS parser, the session state
machine (what is allowed before, during and after authentication; re-authentication)."""

from __future__ import annotations

import base64
import os

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.security.acl import KafkaPrincipal
from moldau.security.jaas import JaasError, parse_jaas
from moldau.security.listeners import ListenerSecurity, SecurityProtocol
from moldau.security.plain import PlainServer, plain_token
from moldau.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslFailure,
    ScramClient,
    ScramServer,
)
from moldau.security.session import Session, State

SALT = os.urandom(16)


def store(mechanism, users: dict[str, str], iterations: int = 4096):
    creds = {
        name: mechanism.credential(
            mechanism.salted_password(pw, SALT, iterations), SALT, iterations
        )
        for name, pw in users.items()
    }
    return lambda user, m: creds.get(user) if m is mechanism else None


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_round_trip(mechanism):
    server = ScramServer(mechanism, store(mechanism, {"alice": "s3cret"}))
    client = ScramClient(mechanism, "alice", "s3cret")
    server_first = server.evaluate(client.first())
    assert server_first.startswith(b"r=") and b",i=4096" in server_first
    client.verify(server.evaluate(client.final(server_first)))
    assert server.complete and server.user == "alice"


def test_scram_rfc7677_vector():
    """RFC 7677's SCRAM-SHA-256 example, with its fixed nonces, salt and iterations."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = SCRAM_SHA_256.credential(
        SCRAM_SHA_256.salted_password("pencil", salt, 4096), salt, 4096
    )
    server = ScramServer(SCRAM_SHA_256, lambda u, m: credential if u == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"  # the RFC's
    server._server_first = f"r={server._nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert first.startswith(b"r=rOprNGfwEbeRWgbNEkqO")
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_refuses_wrong_password_nonce_and_user():
    creds = store(SCRAM_SHA_256, {"alice": "right"})
    server = ScramServer(SCRAM_SHA_256, creds)
    client = ScramClient(SCRAM_SHA_256, "alice", "wrong")
    first = server.evaluate(client.first())
    with pytest.raises(SaslFailure, match="invalid password"):
        server.evaluate(client.final(first))
    # A replayed or forged nonce.
    server = ScramServer(SCRAM_SHA_256, creds)
    client = ScramClient(SCRAM_SHA_256, "alice", "right")
    first = server.evaluate(client.first())
    final = client.final(first)
    nonce = final.split(b",r=")[1].split(b",")[0]
    forged = final.replace(nonce, nonce[:-1] + (b"x" if nonce[-1:] != b"x" else b"y"))
    with pytest.raises(SaslFailure, match="nonce"):
        server.evaluate(forged)
    with pytest.raises(SaslFailure, match="unknown user"):
        ScramServer(SCRAM_SHA_256, creds).evaluate(b"n,,n=bob,r=abc")
    with pytest.raises(SaslFailure, match="channel binding"):
        ScramServer(SCRAM_SHA_256, creds).evaluate(b"p=tls-unique,,n=alice,r=abc")
    with pytest.raises(SaslFailure, match="authorization id"):
        ScramServer(SCRAM_SHA_256, creds).evaluate(b"n,a=bob,n=alice,r=abc")
    # The client too refuses a server that does not extend its nonce.
    client = ScramClient(SCRAM_SHA_256, "alice", "right")
    with pytest.raises(SaslFailure):
        client.final(b"r=other,s=" + base64.b64encode(SALT) + b",i=4096")


def test_plain():
    server = PlainServer({"alice": "pw"})
    assert server.evaluate(plain_token("alice", "pw")) == b"" and server.user == "alice"
    for token, message in [
        (plain_token("alice", "bad"), "Invalid username or password"),
        (plain_token("nobody", "pw"), "Invalid username or password"),
        (b"alice\0pw", "expected 3 tokens"),
        (b"bob\0alice\0pw", "authorization id"),
        (plain_token("", "pw"), "username not specified"),
    ]:
        with pytest.raises(SaslFailure) as e:
            PlainServer({"alice": "pw"}).evaluate(token)
        assert message in (e.value.client_message or "")


def test_jaas():
    jaas = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password=\'ad"min\' user_admin="admin-secret" user_bob=bob-pw;'
    )
    assert jaas.module.endswith("PlainLoginModule") and jaas.flag == "required"
    assert jaas.options["password"] == 'ad"min'
    assert jaas.plain_users == {"admin": "admin-secret", "bob": "bob-pw"}
    with pytest.raises(JaasError, match=";"):
        parse_jaas('x.Module required a="b"')
    with pytest.raises(JaasError):
        parse_jaas("not a jaas config")


def sasl_listener(reauth_ms: int = 0) -> ListenerSecurity:
    return ListenerSecurity(
        "SASL",
        SecurityProtocol.SASL_PLAINTEXT,
        mechanisms=("PLAIN", "SCRAM-SHA-256"),
        plain_users={"alice": "pw", "bob": "pw"},
        reauth_ms=reauth_ms,
    )


def test_session_gates_requests_until_authenticated():
    s = Session(sasl_listener(), store(SCRAM_SHA_256, {}))
    assert s.refusal(ApiKey.API_VERSIONS, 0) is None
    assert "METADATA during SASL handshake" in (s.refusal(ApiKey.METADATA, 0) or "")
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    assert "during SASL authentication" in (s.refusal(ApiKey.API_VERSIONS, 0) or "")
    outcome = s.authenticate(plain_token("alice", "pw"), 2, 0)
    assert outcome.error == ErrorCode.NONE and outcome.session_lifetime_ms == 0
    assert s.authenticated and s.principal == KafkaPrincipal("User", "alice")
    assert s.refusal(ApiKey.PRODUCE, 10**12) is None  # no reauth: never expires
    assert s.authenticate(b"", 2, 0).error == ErrorCode.ILLEGAL_SASL_STATE


def test_session_failures():
    s = Session(sasl_listener(), store(SCRAM_SHA_256, {}))
    assert s.handshake("GSSAPI", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert s.state == State.FAILED and s.refusal(ApiKey.API_VERSIONS, 0)
    s = Session(sasl_listener(), store(SCRAM_SHA_256, {}))
    s.handshake("PLAIN", 1)
    outcome = s.authenticate(plain_token("alice", "nope"), 1, 0)
    assert outcome.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert s.state == State.FAILED
    s = Session(sasl_listener(), store(SCRAM_SHA_256, {}))
    s.handshake("SCRAM-SHA-256", 1)
    outcome = s.authenticate(b"n,,n=ghost,r=abc", 1, 0)
    assert outcome.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in (outcome.message or "")
    # A listener without SASL answers the SASL requests with ILLEGAL_SASL_STATE.
    plain = Session(ListenerSecurity.plaintext(), store(SCRAM_SHA_256, {}))
    assert plain.authenticated and plain.handshake("PLAIN", 1) == ErrorCode.ILLEGAL_SASL_STATE


def test_legacy_v0_handshake_then_raw_tokens():
    s = Session(sasl_listener(), store(SCRAM_SHA_256, {"alice": "pw"}))
    assert s.handshake("SCRAM-SHA-256", 0) == ErrorCode.NONE and s.raw_tokens
    client = ScramClient(SCRAM_SHA_256, "alice", "pw")
    server_first = s.raw_token(client.first(), 0)
    assert server_first is not None
    server_final = s.raw_token(client.final(server_first), 0)
    assert server_final is not None
    client.verify(server_final)
    assert s.authenticated and not s.raw_tokens


def test_reauthentication():
    s = Session(sasl_listener(reauth_ms=1000), store(SCRAM_SHA_256, {}))
    s.handshake("PLAIN", 1)
    assert s.authenticate(plain_token("alice", "pw"), 2, 5000).session_lifetime_ms == 1000
    assert s.refusal(ApiKey.FETCH, 5999) is None
    assert "expired" in (s.refusal(ApiKey.FETCH, 6000) or "")
    assert s.refusal(ApiKey.SASL_HANDSHAKE, 6000) is None  # re-authentication may start
    assert s.handshake("PLAIN", 1) == ErrorCode.NONE
    assert s.authenticate(plain_token("alice", "pw"), 2, 6000).error == ErrorCode.NONE
    assert s.refusal(ApiKey.FETCH, 6500) is None and s.expires_at_ms == 7000
    # Another principal, or another mechanism, is refused.
    s.handshake("PLAIN", 1)
    outcome = s.authenticate(plain_token("bob", "pw"), 2, 6600)
    assert outcome.error == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in (outcome.message or "")
    s2 = Session(sasl_listener(reauth_ms=1000), store(SCRAM_SHA_256, {}))
    s2.handshake("PLAIN", 1)
    s2.authenticate(plain_token("alice", "pw"), 1, 0)
    assert s2.handshake("SCRAM-SHA-256", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    # A v0 SaslAuthenticate client cannot re-authenticate: expiry closes it.
    s3 = Session(sasl_listener(reauth_ms=1000), store(SCRAM_SHA_256, {}))
    s3.handshake("PLAIN", 1)
    s3.authenticate(plain_token("alice", "pw"), 0, 0)
    assert s3.refusal(ApiKey.SASL_HANDSHAKE, 2000)
