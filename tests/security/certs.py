"""Certificates made by the tests (``cryptography``), written to a test's temp dir.

A :class:`Pki` is one CA; :meth:`Pki.issue` signs leaf certificates for the broker
(SANs 127.0.0.1 and localhost) or for clients (a subject to map to a principal), valid
now or already expired. Files are PEM: ``<name>.pem`` holds key + chain (what
``ssl.keystore.type=PEM`` and librdkafka read), ``<name>.crt``/``<name>.key`` the parts.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str, org: str = "Moldau Tests") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "CZ"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@dataclass(frozen=True)
class Issued:
    keystore: Path  # key + certificate chain
    cert: Path
    key: Path
    subject: str  # RFC 2253, as the broker sees it


class Pki:
    def __init__(self, directory: Path, name: str = "ca") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        subject = _name(f"Moldau Test CA {name}")
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )  # fmt: skip
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = self.dir / f"{name}.crt"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str,
        cn: str,
        *,
        server: bool = False,
        expired: bool = False,
        org: str = "Moldau Tests",
        key_password: str | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        start, end = (
            (now - dt.timedelta(days=10), now - dt.timedelta(days=1))
            if expired
            else (now - dt.timedelta(hours=1), now + dt.timedelta(days=7))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        # A node's certificate also identifies it when it connects to other nodes (mTLS).
        usages = [x509.ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.insert(0, x509.ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        chain = cert_pem + self.cert.public_bytes(serialization.Encoding.PEM)
        key_pem = _pem_key(key, key_password)
        paths = Issued(
            self.dir / f"{name}.pem",
            self.dir / f"{name}.crt",
            self.dir / f"{name}.key",
            cert.subject.rfc4514_string(),
        )
        paths.keystore.write_bytes(key_pem + chain)
        paths.cert.write_bytes(chain)
        paths.key.write_bytes(key_pem)
        for p in (paths.keystore, paths.key):
            p.chmod(0o600)
        return paths
