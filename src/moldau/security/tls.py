"""TLS from Kafka's ``ssl.*`` configs, and the principal of a client certificate.

Keystores and truststores are PEM (``ssl.keystore.type=PEM``: a file with the private key
and the certificate chain, or the two inline in ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``) or PKCS12 (read with ``cryptography``); Java's JKS
format is refused with a message saying what to use instead. ``ssl.client.auth`` is
none/requested/required, ``ssl.enabled.protocols`` bounds the TLS versions and
``ssl.cipher.suites`` (IANA names as Java takes them, or OpenSSL names) the TLS 1.2
suites. A client certificate's subject, as an RFC 2253 distinguished name, goes through
``ssl.principal.mapping.rules`` (Kafka's ``RULE:pattern/replacement/[LU]`` and
``DEFAULT``) to become ``User:<name>``.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from moldau.security.acl import ANONYMOUS, KafkaPrincipal

Lookup = Callable[[str], str | None]
"""A config value by Kafka key (listener overrides already applied); None when unset."""


class TlsConfigError(ValueError):
    pass


_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                          "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                          "TLS_AES_128_CCM_8_SHA256"})  # fmt: skip


def server_context(get: Lookup) -> ssl.SSLContext:
    """The context of a listener with SSL or SASL_SSL."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_ciphers(ctx, get)
    if not _load_keystore(ctx, get):
        raise TlsConfigError(
            "an SSL listener needs a key and certificate: ssl.keystore.location "
            "(ssl.keystore.type=PEM or PKCS12) or ssl.keystore.key + ssl.keystore.certificate.chain"
        )
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth must be none, requested or required, not {auth!r}")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none" and not _load_truststore(ctx, get):
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(get: Lookup) -> ssl.SSLContext:
    """The context this node uses to connect to another's SSL listener."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions_and_ciphers(ctx, get)
    _load_keystore(ctx, get)  # a client certificate is optional
    if not _load_truststore(ctx, get):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = get("ssl.endpoint.identification.algorithm")
    # Kafka's default is https: the server's certificate must name the host we dialled.
    ctx.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _versions_and_ciphers(ctx: ssl.SSLContext, get: Lookup) -> None:
    names = _list(get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(
            f"ssl.enabled.protocols: unknown {', '.join(unknown) or '(empty)'}; "
            f"use {', '.join(_VERSIONS)}"
        )
    versions = sorted(_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = _list(get("ssl.cipher.suites") or "")
    if suites:
        tls12 = [s for s in suites if s not in TLS13_SUITES]
        if tls12:
            ctx.set_ciphers(":".join(_openssl_cipher(ctx, s) for s in tls12))
        if len(tls12) == len(suites) and ctx.maximum_version > ssl.TLSVersion.TLSv1_2:
            # Only TLS 1.2 suites listed: TLS 1.3 (whose suites are separate) is off, as in Java.
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2


def _openssl_cipher(ctx: ssl.SSLContext, suite: str) -> str:
    """OpenSSL's name of a suite given by its IANA name (or already OpenSSL's)."""
    available = {c["name"] for c in ctx.get_ciphers()}
    if suite in available:
        return suite
    kx, sep, rest = suite.removeprefix("TLS_").partition("_WITH_")
    if sep:
        cipher = (
            rest.replace("AES_128", "AES128")
            .replace("AES_256", "AES256")
            .replace("_CBC", "")
            .replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
            .replace("_", "-")
        )
        name = cipher if kx == "RSA" else f"{kx.replace('_', '-')}-{cipher}"
        if name in available:
            return name
    raise TlsConfigError(f"ssl.cipher.suites: {suite} is not a cipher suite this OpenSSL offers")


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _load_keystore(ctx: ssl.SSLContext, get: Lookup) -> bool:
    kind = (get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    key_password = get("ssl.key.password")
    if chain or key:
        if not (chain and key):
            raise TlsConfigError("ssl.keystore.key and ssl.keystore.certificate.chain go together")
        if kind != "PEM":
            raise TlsConfigError("inline keys (ssl.keystore.key) need ssl.keystore.type=PEM")
        with _temp_pem(key + "\n" + chain) as path:
            _load_chain(ctx, path, key_password)
        return True
    if not location:
        return False
    if kind == "PEM":
        if get("ssl.keystore.password"):
            raise TlsConfigError(
                "SSL key store password cannot be specified with PEM format, only key password "
                "may be specified (ssl.key.password)"
            )
        _load_chain(ctx, location, key_password)
    elif kind == "PKCS12":
        data = _read(location, "ssl.keystore.location")
        password = get("ssl.keystore.password")
        try:
            private_key, cert, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password else None
            )
        except ValueError as e:
            raise TlsConfigError(f"ssl.keystore.location {location}: {e}") from None
        if private_key is None or cert is None:
            raise TlsConfigError(f"ssl.keystore.location {location} holds no key and certificate")
        pem = private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra])
        with _temp_pem(pem.decode()) as path:
            _load_chain(ctx, path, None)
    else:
        raise TlsConfigError(
            f"ssl.keystore.type={kind} is not supported: use PEM (or PKCS12); convert a JKS "
            "keystore with keytool -importkeystore -deststoretype PKCS12"
        )
    return True


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None) -> None:
    try:
        ctx.load_cert_chain(path, password=password or None)
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(f"cannot load the key and certificate chain: {e}") from None


def _load_truststore(ctx: ssl.SSLContext, get: Lookup) -> bool:
    kind = (get("ssl.truststore.type") or "JKS").upper()
    inline, location = get("ssl.truststore.certificates"), get("ssl.truststore.location")
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline)
        elif not location:
            return False
        elif kind == "PEM":
            ctx.load_verify_locations(cafile=location)
        elif kind == "PKCS12":
            password = get("ssl.truststore.password")
            store = pkcs12.load_pkcs12(
                _read(location, "ssl.truststore.location"), password.encode() if password else None
            )
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.append(store.cert.certificate)
            ctx.load_verify_locations(
                cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
            )
        else:
            raise TlsConfigError(
                f"ssl.truststore.type={kind} is not supported: use PEM (or PKCS12)"
            )
    except (ssl.SSLError, OSError, ValueError) as e:
        if isinstance(e, TlsConfigError):
            raise
        raise TlsConfigError(f"cannot load the truststore: {e}") from None
    return True


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{key}: cannot read {path}: {e.strerror}") from None


@contextlib.contextmanager
def _temp_pem(text: str) -> Iterator[str]:
    """Python's ssl loads keys only from files: an owner-only one, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)


# --- the principal of a client certificate ----------------------------------------------

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))\s*(?:,|$)"
)
_BACKREF = re.compile(r"\$(\d)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        name = m.expand(self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule that matches the whole DN names it."""

    def __init__(self, rules: str | None = None) -> None:
        text = (rules or "DEFAULT").strip()
        self.rules: list[_Rule] = []
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise TlsConfigError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
            if m["default"]:
                self.rules.append(_Rule(None))
            else:
                replacement = _BACKREF.sub(r"\\g<\1>", m["replacement"])
                try:
                    pattern = re.compile(m["pattern"])
                except re.error as e:
                    raise TlsConfigError(f"ssl.principal.mapping.rules: {e}") from None
                self.rules.append(_Rule(pattern, replacement, m["case"]))
            pos = m.end()

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise TlsConfigError(f"No rules apply to {dn}")


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as an RFC 2253 string (``CN=alice,O=acme``)."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def peer_principal(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: PrincipalMapper
) -> KafkaPrincipal:
    """``User:<mapped subject>`` of the verified client certificate; ANONYMOUS without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return KafkaPrincipal("User", mapper.name(certificate_dn(der)))
