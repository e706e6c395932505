"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

The server keeps per user and mechanism a salt, an iteration count, StoredKey =
H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key")
(UserScramCredentialRecords): never the password. :class:`ScramServer` and
:class:`ScramClient` are sans-IO exchanges of the three messages:

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce + server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 ClientKey XOR HMAC(StoredKey, AuthMessage)>
    server-final  v=<base64 HMAC(ServerKey, AuthMessage)>

The server checks the channel-binding header, that the nonce it gets back ends with the
one it sent (the client's and its own, as Kafka checks it), and the proof; anything off
fails the exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from moldau.metadata.security import ScramCredential


class SaslFailure(Exception):
    """Authentication failed. The message is for the broker's log; ``client_message``, if
    any, is what the client may be told (Kafka tells SCRAM clients nothing specific)."""

    def __init__(self, message: str, client_message: str | None = None) -> None:
        super().__init__(message)
        self.client_message = client_message


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    type: int  # the code in UserScramCredentialRecord / AlterUserScramCredentials
    hash_name: str
    min_iterations: int = 4096

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def credential(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(
            salt=salt,
            stored_key=self.digest(client_key),
            server_key=self.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager bound
GS2_HEADER = b"n,,"


def _attributes(message: bytes) -> dict[str, str]:
    """``a=x,b=y`` into a dict; SaslFailure if it is not that shape."""
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise SaslFailure("SCRAM message is not UTF-8") from None
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SaslFailure(f"malformed SCRAM attribute {item!r}")
        out.setdefault(key, value)
    return out


def _sasl_name(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign; others are errors."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1 : i + 3]
            if code not in ("2C", "3D"):
                raise SaslFailure("invalid escape in SCRAM user name")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _nonce() -> str:
    return secrets.token_urlsafe(24)  # letters, digits, '-' and '_': never a comma


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslFailure("invalid base64 in SCRAM message") from None


CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


class ScramServer:
    """The server side of one exchange: :meth:`evaluate` each client message in turn."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.user: str | None = None
        self.complete = False
        self._step = 0
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = b""

    def evaluate(self, message: bytes) -> bytes:
        step, self._step = self._step, self._step + 1
        if step == 0:
            return self._first(message)
        if step == 1:
            return self._final(message)
        raise SaslFailure("unexpected SCRAM message after the exchange")

    def _first(self, message: bytes) -> bytes:
        text = message.decode(errors="replace")
        if not text.startswith(("n,", "y,")):
            raise SaslFailure("SCRAM channel binding is not supported")
        _, authzid, bare = (text.split(",", 2) + ["", ""])[:3]
        self._gs2_header = text[: len(text) - len(bare)].encode()
        attrs = _attributes(bare.encode())
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise SaslFailure("SCRAM client-first message lacks a user or a nonce")
        user = _sasl_name(attrs["n"])
        if authzid and _sasl_name(authzid.removeprefix("a=")) != user:
            raise SaslFailure("authorization id differs from the user name")
        if not all(0x21 <= ord(c) <= 0x7E and c != "," for c in attrs["r"]):
            raise SaslFailure("invalid SCRAM client nonce")
        credential = self.credentials(user, self.mechanism)
        if credential is None:
            raise SaslFailure(f"unknown user {user!r} for {self.mechanism.name}")
        self.user, self._credential = user, credential
        self._nonce = attrs["r"] + _nonce()
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, message: bytes) -> bytes:
        assert self._credential is not None
        text = message.decode(errors="replace")
        without_proof, sep, proof_attr = text.rpartition(",p=")
        attrs = _attributes(without_proof.encode())
        if not sep:
            raise SaslFailure("SCRAM client-final message lacks a proof")
        if attrs.get("c") != _b64(self._gs2_header):
            raise SaslFailure("SCRAM channel binding does not match")
        # Kafka checks that the nonce ends with the server's (librdkafka before 2.2 sends
        # its own nonce twice); the server's random part is what makes it fresh.
        if not attrs.get("r", "").endswith(self._nonce):
            raise SaslFailure("SCRAM nonce does not match the server's")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        m, c = self.mechanism, self._credential
        client_signature = m.hmac(c.stored_key, auth_message)
        proof = _unb64(proof_attr)
        if len(proof) != len(client_signature):
            raise SaslFailure("invalid SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(m.digest(client_key), c.stored_key):
            raise SaslFailure(f"invalid password for user {self.user!r}")
        self.complete = True
        return f"v={_b64(m.hmac(c.server_key, auth_message))}".encode()


class ScramClient:
    """The client side (inter-broker connections, tests): three calls, in order."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str) -> None:
        self.mechanism = mechanism
        self.user = user
        self.password = password
        self._nonce = _nonce()
        self._client_first_bare = f"n={_escape(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return GS2_HEADER + self._client_first_bare.encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = _attributes(server_first)
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslFailure("the server's SCRAM nonce does not extend ours")
        iterations = int(attrs.get("i", "0"))
        if iterations < self.mechanism.min_iterations:
            raise SaslFailure(f"the server asks for only {iterations} SCRAM iterations")
        m = self.mechanism
        salted = m.salted_password(self.password, _unb64(attrs.get("s", "")), iterations)
        without_proof = f"c={_b64(GS2_HEADER)},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = m.hmac(salted, b"Client Key")
        signature = m.hmac(m.digest(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final)
        if "e" in attrs:
            raise SaslFailure(f"SCRAM authentication failed: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
            raise SaslFailure("the server's SCRAM signature is wrong")
