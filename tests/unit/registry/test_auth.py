"""The registry's basic authentication against SCRAM credentials, and its 401/403 errors."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from moldau.metadata.security import ScramCredential
from moldau.registry.auth import (
    RegistryAccess,
    basic_credentials,
    password_matches,
    users_file_credentials,
)
from moldau.registry.errors import RegistryError
from moldau.security.acl import ANONYMOUS, AclOperation, KafkaPrincipal, ResourceType
from moldau.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramMechanism


def credential(mechanism: ScramMechanism, password: str, salt: bytes = b"salt") -> ScramCredential:
    return mechanism.credential(mechanism.salted_password(password, salt, 4096), salt, 4096)


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Store:
    """SCRAM credentials by (user, mechanism name), changeable between requests."""

    def __init__(self) -> None:
        self.users: dict[tuple[str, str], ScramCredential] = {}

    def __call__(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.users.get((user, mechanism.name))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_password_matches_stored_key(mechanism: ScramMechanism) -> None:
    stored = credential(mechanism, "pa:ss")
    assert password_matches("pa:ss", stored, mechanism)
    assert not password_matches("pa:sS", stored, mechanism)


@pytest.mark.parametrize(
    "value",
    [None, "", "Bearer abc", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
     "Basic " + base64.b64encode(b":nouser").decode(), "Basic " + base64.b64encode(b"\xff:x").decode()],
)  # fmt: skip
def test_malformed_headers_are_not_credentials(value: str | None) -> None:
    assert basic_credentials(value) is None


def test_password_may_hold_colons() -> None:
    assert basic_credentials(header("alice", "a:b:c")) == ("alice", "a:b:c")


def test_authenticate_either_mechanism_and_follow_credential_changes() -> None:
    store = Store()
    store.users[("alice", "SCRAM-SHA-512")] = credential(SCRAM_SHA_512, "old")
    access = RegistryAccess(store)
    assert access.authenticate(header("alice", "old")) == KafkaPrincipal("User", "alice")
    assert access.authenticate(header("alice", "old")) == KafkaPrincipal("User", "alice")
    store.users[("alice", "SCRAM-SHA-512")] = credential(SCRAM_SHA_512, "new", b"salt2")
    for refused in (header("alice", "old"), header("bob", "old"), None, "Basic x"):
        with pytest.raises(RegistryError) as e:
            access.authenticate(refused)
        assert (e.value.status, e.value.error_code, e.value.message) == (401, 401, "Unauthorized")
    store.users[("alice", "SCRAM-SHA-256")] = credential(SCRAM_SHA_256, "other")
    assert access.authenticate(header("alice", "other")).name == "alice"
    del store.users[("alice", "SCRAM-SHA-256")]
    with pytest.raises(RegistryError):
        access.authenticate(header("alice", "other"))


def test_without_authentication_everyone_is_anonymous() -> None:
    assert RegistryAccess().authenticate(None) == ANONYMOUS


def test_subjects_are_topics_and_global_settings_the_cluster() -> None:
    asked = []

    def authorizer(
        principal: KafkaPrincipal, host: str, op: AclOperation, kind: ResourceType, name: str
    ) -> bool:
        asked.append((kind, name, op))
        return kind == ResourceType.TOPIC and op == AclOperation.READ

    access = RegistryAccess(None, authorizer)
    alice = KafkaPrincipal("User", "alice")
    access.check(alice, "127.0.0.1", AclOperation.READ, "orders-value")
    with pytest.raises(RegistryError) as e:
        access.check(alice, "127.0.0.1", AclOperation.WRITE, "orders-value")
    assert (e.value.status, e.value.error_code) == (403, 40301)
    assert e.value.message == "User is denied operation Write on Subject: orders-value"
    with pytest.raises(RegistryError) as e:
        access.check(alice, "127.0.0.1", AclOperation.ALTER_CONFIGS, None)
    assert e.value.message == "User is denied operation AlterConfigs on Cluster: kafka-cluster"
    assert asked[-1] == (ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER_CONFIGS)


def test_broker_settings() -> None:
    from moldau.config.broker import BrokerConfig, ConfigError

    def load(*pairs: str) -> BrokerConfig:
        return BrokerConfig.load(None, ["log.dirs=/tmp/unused", *pairs])

    https = load("schema.registry.listeners=https://127.0.0.1:8081/")
    assert https.schema_registry_listener == "https://127.0.0.1:8081"
    for bad in ("schema.registry.listeners=ftp://h:1", "schema.registry.authentication.method=X"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            load(bad)
    load("schema.registry.authentication.method=basic")


def test_users_file(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("# comment\n\nalice: s3cret,admin\nbob:hunter2\n")
    access = RegistryAccess(users_file_credentials(users))
    for user, password in (("alice", "s3cret"), ("bob", "hunter2")):
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        assert access.authenticate(f"Basic {token}") == KafkaPrincipal("User", user)
    with pytest.raises(RegistryError):
        access.authenticate("Basic " + base64.b64encode(b"alice:admin").decode())
    for bad in ("alice s3cret", "carol: OBF:1v2j1uum1xtv", "dave:"):
        users.write_text(bad + "\n")
        with pytest.raises(ValueError, match=":1:"):
            users_file_credentials(users)
