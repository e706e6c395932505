"""Kafka's ``ssl.*`` settings as ``security/tls.py`` turns them into contexts, checked by
real TLS handshakes between a server and a client context over memory buffers:
encrypted PEM keys, inline PEM, PKCS12, ``ssl.client.auth``, ``ssl.enabled.protocols``,
``ssl.cipher.suites`` and ``ssl.endpoint.identification.algorithm``."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from moldau.security.acl import ANONYMOUS
from moldau.security.tls import (
    PrincipalMapper,
    TlsConfigError,
    client_context,
    peer_principal,
    server_context,
)
from tests.security.conftest import MAPPING

Settings = dict[str, str]


def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, host: str = "localhost"
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Both ends of a completed handshake; the ssl.SSLError of whichever end refused."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    ends = [
        client.wrap_bio(client_in, client_out, server_hostname=host),
        server.wrap_bio(server_in, server_out, server_side=True),
    ]
    done: set[int] = set()
    for _ in range(10):
        for i, end in enumerate(ends):
            if i not in done:
                try:
                    end.do_handshake()
                    done.add(i)
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if len(done) == 2:
            # TLS 1.3 clients learn that their certificate was refused on their first read.
            with pytest.raises(ssl.SSLWantReadError):
                ends[0].read()
            return ends[1], ends[0]
    raise AssertionError("the handshake did not finish")


def pem_store(issued: Any) -> Settings:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(issued.keystore)}


@pytest.fixture(scope="module")
def trust(certs: dict[str, Any]) -> Settings:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs["pki"].ca_file)}


@pytest.fixture(scope="module")
def server(certs: dict[str, Any], trust: Settings) -> Settings:
    return {**pem_store(certs["broker"]), **trust}


def test_encrypted_pem_key_needs_ssl_key_password(certs: dict[str, Any], trust: Settings) -> None:
    issued = certs["pki"].issue("locked", "localhost", server=True, key_password="k3y-pw")
    assert b"ENCRYPTED PRIVATE KEY" in issued.keystore.read_bytes()
    good = server_context({**pem_store(issued), "ssl.key.password": "k3y-pw"}.get)
    _, cli = handshake(good, client_context(trust.get))
    assert (("commonName", "localhost"),) in cli.getpeercert()["subject"]
    with pytest.raises(TlsConfigError, match="cannot load the key"):
        server_context({**pem_store(issued), "ssl.key.password": "wrong"}.get)
    with pytest.raises(TlsConfigError, match="only key password"):
        server_context({**pem_store(issued), "ssl.keystore.password": "k3y-pw"}.get)


def test_inline_pem_keystore_and_truststore(certs: dict[str, Any]) -> None:
    broker = certs["broker"]
    inline = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": broker.key.read_text(),
        "ssl.keystore.certificate.chain": broker.cert.read_text(),
    }
    trust = {"ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": certs["pki"].ca_file.read_text()}  # fmt: skip
    handshake(server_context(inline.get), client_context(trust.get))
    with pytest.raises(TlsConfigError, match="go together"):
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"}.get)


def test_pkcs12_keystore_and_truststore(certs: dict[str, Any], tmp_path: Path) -> None:
    broker, ca = certs["broker"], certs["pki"].cert
    key = serialization.load_pem_private_key(broker.key.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(broker.cert.read_bytes())
    encryption = serialization.BestAvailableEncryption(b"p12-pw")
    store = tmp_path / "broker.p12"
    p12 = pkcs12.serialize_key_and_certificates(b"broker", key, cert, [ca], encryption)
    store.write_bytes(p12)
    trusted = tmp_path / "trust.p12"
    trusted.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, ca, None, encryption))
    settings = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                "ssl.keystore.password": "p12-pw"}  # fmt: skip
    trust = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(trusted),
             "ssl.truststore.password": "p12-pw"}  # fmt: skip
    handshake(server_context(settings.get), client_context(trust.get))
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        server_context({**settings, "ssl.keystore.password": "wrong"}.get)
    with pytest.raises(TlsConfigError, match="keytool"):
        server_context({"ssl.keystore.type": "JKS", "ssl.keystore.location": str(store)}.get)


@pytest.mark.parametrize("auth", ["none", "requested", "required"])
def test_client_auth(certs: dict[str, Any], server: Settings, trust: Settings, auth: str) -> None:
    """none: no certificate asked for; requested: used if sent; required: refused without."""
    ctx = server_context({**server, "ssl.client.auth": auth}.get)
    mapper = PrincipalMapper(MAPPING)
    with_cert = client_context({**trust, **pem_store(certs["alice"])}.get)
    srv, _ = handshake(ctx, with_cert)
    expected = ANONYMOUS if auth == "none" else "User:alice"
    assert str(peer_principal(srv, mapper)) == str(expected)
    if auth == "required":
        with pytest.raises(ssl.SSLError, match="CERTIFICATE"):
            handshake(ctx, client_context(trust.get))
    else:
        srv, _ = handshake(ctx, client_context(trust.get))
        assert peer_principal(srv, mapper) == ANONYMOUS
    with pytest.raises(ssl.SSLError, match="CERTIFICATE"):  # a certificate the CA did not sign
        handshake(ctx if auth != "none" else server_context(
            {**server, "ssl.client.auth": "requested"}.get),
            client_context({**trust, **pem_store(certs["rogue"])}.get))  # fmt: skip


def test_enabled_protocols_and_cipher_suites(server: Settings, trust: Settings) -> None:
    tls12 = server_context({**server, "ssl.enabled.protocols": "TLSv1.2"}.get)
    _, cli = handshake(tls12, client_context(trust.get))
    assert cli.version() == "TLSv1.2"
    with pytest.raises(ssl.SSLError):
        handshake(tls12, client_context({**trust, "ssl.enabled.protocols": "TLSv1.3"}.get))
    # An IANA name as Java takes it; listing only TLS 1.2 suites turns TLS 1.3 off.
    suite = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    only = server_context({**server, "ssl.cipher.suites": suite}.get)
    _, cli = handshake(only, client_context(trust.get))
    assert (cli.version(), cli.cipher()[0]) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
    other = client_context({**trust, "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"}.get)
    with pytest.raises(ssl.SSLError):
        handshake(only, other)
    with pytest.raises(TlsConfigError, match="not a cipher suite"):
        server_context({**server, "ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}.get)
    with pytest.raises(TlsConfigError, match="ssl.enabled.protocols"):
        server_context({**server, "ssl.enabled.protocols": "SSLv3"}.get)


def test_endpoint_identification(server: Settings, trust: Settings) -> None:
    ctx = server_context(server.get)
    handshake(ctx, client_context(trust.get), host="127.0.0.1")  # in the certificate's SANs
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|IP address mismatch"):
        handshake(ctx, client_context(trust.get), host="broker.example")
    unchecked = client_context({**trust, "ssl.endpoint.identification.algorithm": ""}.get)
    handshake(ctx, unchecked, host="broker.example")
