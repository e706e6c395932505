"""Who calls the registry, and what they may do: HTTP basic authentication against the
broker's SCRAM credentials, and the broker's authorizer over subjects.

A password is checked as a SCRAM server would check the proof of it: SaltedPassword =
PBKDF2(password, stored salt, stored iterations), and H(HMAC(SaltedPassword, "Client
Key")) must equal the stored StoredKey (compared in constant time), for SCRAM-SHA-256 or
SCRAM-SHA-512, whichever the user has. The broker never keeps the password, so this is
the only check there is.

Subjects are authorized as TOPIC resources named by the subject (so `kafka-acls --topic
orders --resource-pattern-type prefixed` covers `orders-key` and `orders-value`): reading
a subject needs READ, registering WRITE, deleting DELETE, its config or mode
DESCRIBE_CONFIGS / ALTER_CONFIGS; the global config and mode need ALTER_CONFIGS on the
CLUSTER to change.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from moldau.metadata.security import ScramCredential
from moldau.registry.errors import RegistryError
from moldau.security.acl import ANONYMOUS, CLUSTER_NAME, AclOperation, KafkaPrincipal, ResourceType
from moldau.security.scram import MECHANISMS, SCRAM_SHA_512, ScramMechanism

Credentials = Callable[[str, ScramMechanism], ScramCredential | None]
"""The broker's SCRAM credential of a user for a mechanism (None: it has none)."""

Authorize = Callable[[KafkaPrincipal, str, AclOperation, ResourceType, str], bool]
"""The broker's authorizer: (principal, client host, operation, resource type, name)."""

BASIC = "BASIC"
VERIFIED_CACHE_SIZE = 1024


def unauthorized() -> RegistryError:
    """Confluent's answer to missing or wrong credentials (with `WWW-Authenticate`)."""
    return RegistryError(401, 401, "Unauthorized")


def forbidden(operation: AclOperation, resource: ResourceType, name: str) -> RegistryError:
    """Confluent's 40301, naming what was denied."""
    what = "Subject" if resource == ResourceType.TOPIC else "Cluster"
    op = operation.name.replace("_", " ").title().replace(" ", "")
    return RegistryError(403, 40301, f"User is denied operation {op} on {what}: {name}")


def password_matches(password: str, credential: ScramCredential, mechanism: ScramMechanism) -> bool:
    salted = mechanism.salted_password(password, credential.salt, credential.iterations)
    stored_key = mechanism.digest(mechanism.hmac(salted, b"Client Key"))
    return hmac.compare_digest(stored_key, credential.stored_key)


def users_file_credentials(path: Path) -> Credentials:
    """Credentials from a users file in the format of Jetty's HashLoginService, which
    Confluent's registry reads for basic authentication (`user: password[,role...]`, `#`
    comments; plain passwords only). Each password is kept only as a SCRAM-SHA-512
    credential with a random salt, checked like the broker's. ValueError naming the line."""
    found = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        user, sep, rest = text.partition(":")
        password = rest.split(",", 1)[0].strip()
        if not sep or not user.strip() or not password:
            raise ValueError(f"{path}:{number}: expected 'user: password[,role...]'")
        if password.startswith(("OBF:", "MD5:", "CRYPT:")):
            raise ValueError(f"{path}:{number}: only plain passwords are supported")
        salt = os.urandom(16)
        iterations = SCRAM_SHA_512.min_iterations
        salted = SCRAM_SHA_512.salted_password(password, salt, iterations)
        found[user.strip()] = SCRAM_SHA_512.credential(salted, salt, iterations)

    def credentials(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return found.get(user) if mechanism == SCRAM_SHA_512 else None

    return credentials


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header; None if it is not one."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep and user else None


@dataclass(frozen=True)
class RegistryAccess:
    """Authentication (None: everyone is User:ANONYMOUS) and authorization (None: all
    allowed) of registry requests."""

    credentials: Credentials | None = None
    authorizer: Authorize | None = None
    # SHA-256 of an accepted header -> the credential it was checked against: a client
    # sends the same header on every request, and one PBKDF2 each would cost milliseconds.
    # An entry holds only while the user still has that credential (not altered or deleted).
    _verified: dict[bytes, tuple[str, ScramMechanism, ScramCredential]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def authenticate(self, header: str | None) -> KafkaPrincipal:
        """The caller of a request with this Authorization header; 401 if it is not a
        known user with the right password. Costs a PBKDF2: call it off the event loop."""
        if self.credentials is None:
            return ANONYMOUS
        key = hashlib.sha256((header or "").encode()).digest()
        seen = self._verified.get(key)
        if seen is not None and self.credentials(seen[0], seen[1]) == seen[2]:
            return KafkaPrincipal("User", seen[0])
        found = basic_credentials(header)
        if found is not None:
            user, password = found
            for mechanism in MECHANISMS.values():
                credential = self.credentials(user, mechanism)
                if credential is not None and password_matches(password, credential, mechanism):
                    if len(self._verified) >= VERIFIED_CACHE_SIZE:
                        self._verified.clear()
                    self._verified[key] = (user, mechanism, credential)
                    return KafkaPrincipal("User", user)
        raise unauthorized()

    def allowed(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, subject: str | None
    ) -> bool:
        """May the caller do `operation` on `subject` (None: on the whole registry)?"""
        if self.authorizer is None:
            return True
        resource, name = (
            (ResourceType.CLUSTER, CLUSTER_NAME)
            if subject is None
            else (ResourceType.TOPIC, subject)
        )
        return self.authorizer(principal, host, operation, resource, name)

    def check(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, subject: str | None
    ) -> None:
        """403 unless allowed."""
        if not self.allowed(principal, host, operation, subject):
            if subject is None:
                raise forbidden(operation, ResourceType.CLUSTER, CLUSTER_NAME)
            raise forbidden(operation, ResourceType.TOPIC, subject)
