"""The in-server registry over https, with HTTP basic authentication against the broker's
SCRAM users and the broker's authorizer deciding on subjects (TOPIC ACLs named by the
subject), through confluent-kafka's SchemaRegistryClient and plain HTTP requests."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from moldau.testing.cluster import ClusterProcess
from tests.registry.conftest import CONTENT_TYPE, free_port
from tests.registry.test_durability import primary_node
from tests.security.secure import PLAIN_JAAS, Listeners, create_scram_users, jaas, standard_pki

PASSWORDS = {"alice": "alice-secret", "carol": "carol-secret", "admin": "admin-secret"}
DEADLINE_S = 60.0


def avro(name: str) -> Schema:
    fields = [{"name": "id", "type": "long"}]
    return Schema(json.dumps({"type": "record", "name": name, "fields": fields}), "AVRO")


class SecureRegistry:
    def __init__(self, directory: Path) -> None:
        self.certs = standard_pki(directory / "pki")
        self.ca = str(self.certs["pki"].ca_file)
        self.url = f"https://127.0.0.1:{free_port()}"
        configs = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certs["broker"].keystore),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "allow.everyone.if.no.acl.found": "true",
            "schema.registry.listeners": self.url,
            "schema.registry.authentication.method": "BASIC",
        }
        self.broker = Listeners(directory / "broker", {"PLAINTEXT": "PLAINTEXT"}, configs)

    def start(self) -> SecureRegistry:
        self.broker.start()
        self.bootstrap = self.broker.bootstrap("PLAINTEXT")
        create_scram_users(self.bootstrap, {}, PASSWORDS)
        deadline = time.monotonic() + DEADLINE_S
        while self.call("/subjects", "admin")[0] != 200:
            assert time.monotonic() < deadline, "the registry did not serve admin"
            time.sleep(0.2)
        return self

    def client(self, user: str, password: str | None = None) -> SchemaRegistryClient:
        secret = PASSWORDS[user] if password is None else password
        return SchemaRegistryClient(
            {
                "url": self.url,
                "ssl.ca.location": self.ca,
                "basic.auth.user.info": f"{user}:{secret}",
            }
        )

    def call(
        self,
        path: str,
        user: str | None,
        method: str = "GET",
        body: Any = None,
        password: str | None = None,
    ) -> tuple[int, Any, Any]:
        """(status, decoded body, headers) of one https request as `user` (None: no
        credentials)."""
        headers = {"Content-Type": CONTENT_TYPE}
        if user is not None:
            secret = PASSWORDS.get(user, "") if password is None else password
            token = base64.b64encode(f"{user}:{secret}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        context = ssl.create_default_context(cafile=self.ca)
        try:
            with urllib.request.urlopen(request, timeout=60, context=context) as answer:
                return answer.status, json.loads(answer.read()), answer.headers
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read()), e.headers
        except OSError:
            return 0, None, None


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRegistry]:
    running = SecureRegistry(tmp_path_factory.mktemp("secure-registry"))
    try:
        yield running.start()
    finally:
        running.broker.close()


def test_client_over_https_with_basic_auth(secure: SecureRegistry) -> None:
    client = secure.client("alice")
    schema_id = client.register_schema("tls-value", avro("Tls"))
    assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "Tls"
    latest = client.get_latest_version("tls-value")
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert client.lookup_schema("tls-value", avro("Tls")).schema_id == schema_id


def test_plain_http_is_not_served(secure: SecureRegistry) -> None:
    plain = secure.url.replace("https:", "http:")
    with pytest.raises((urllib.error.URLError, OSError)):
        urllib.request.urlopen(plain + "/subjects", timeout=30).read()


@pytest.mark.parametrize(
    ("user", "password"), [(None, None), ("alice", "wrong"), ("nobody", "alice-secret")]
)
def test_missing_or_bad_credentials_401(
    secure: SecureRegistry, user: str | None, password: str | None
) -> None:
    status, body, headers = secure.call("/subjects", user, password=password)
    assert status == 401
    assert body == {"error_code": 401, "message": "Unauthorized"}
    assert headers["WWW-Authenticate"].startswith("Basic")
    with pytest.raises(SchemaRegistryError) as refused:
        secure.client("alice", "wrong").get_subjects()
    assert refused.value.http_status_code == 401


def test_scram_sha_512_only_user(secure: SecureRegistry) -> None:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + DEADLINE_S
    while secure.call("/subjects", "dave", password="dave-secret")[0] != 200:
        assert time.monotonic() < deadline, "dave (SCRAM-SHA-512 only) never got in"
        time.sleep(0.2)
    assert secure.call("/subjects", "dave", password="alice-secret")[0] == 401


def _create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_acls(bindings).values():
        try:
            future.result(timeout=30)
        except KafkaException as e:
            raise AssertionError(f"cannot create ACLs: {e}") from None


def _acl(user: str, op: AclOperation, name: str, pattern: ResourcePatternType) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW
    )


def test_authorizer_decides_on_subjects(secure: SecureRegistry) -> None:
    prefixed, literal = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
    _create_acls(
        secure.bootstrap,
        [
            _acl("carol", AclOperation.ALL, "secret-", prefixed),
            _acl("alice", AclOperation.READ, "secret-shared", literal),
        ],
    )
    carol = secure.client("carol")
    deadline = time.monotonic() + DEADLINE_S
    while secure.call("/subjects/secret-x/versions", "alice")[0] != 403:
        assert time.monotonic() < deadline, "the ACLs never reached the registry"
        time.sleep(0.2)
    hidden = carol.register_schema("secret-x", avro("Hidden"))
    shared = carol.register_schema("secret-shared", avro("Shared"))
    assert {"secret-x", "secret-shared"} <= set(carol.get_subjects())

    status, body, _ = secure.call(
        "/subjects/secret-x/versions", "alice", "POST", {"schema": avro("Mine").schema_str}
    )
    assert (status, body["error_code"]) == (403, 40301)
    assert "Write" in body["message"] and "secret-x" in body["message"]
    visible = secure.call("/subjects", "alice")[1]
    assert "secret-shared" in visible and "secret-x" not in visible
    assert secure.call(f"/schemas/ids/{hidden}", "alice")[0] == 403
    assert secure.call(f"/schemas/ids/{shared}", "alice")[0] == 200

    alice = secure.client("alice")
    assert alice.get_latest_version("secret-shared").schema_id == shared
    with pytest.raises(SchemaRegistryError) as refused:
        alice.register_schema("secret-shared", avro("Other"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as refused:
        alice.delete_subject("secret-shared")
    assert refused.value.http_status_code == 403
    assert secure.call("/config/secret-shared", "alice", "PUT", {"compatibility": "NONE"})[0] == 403
    assert secure.call("/config", "carol", "PUT", {"compatibility": "NONE"})[0] == 200
    assert secure.call("/subjects/open-value/versions", "alice")[1]["error_code"] == 40401


def test_standalone_registry_over_https_with_a_users_file(
    secure: SecureRegistry, tmp_path: Path
) -> None:
    """`moldau registry --listener https://... -L ssl.* --basic-auth-users FILE`: the same
    TLS settings as a broker listener, basic authentication against the file's users; it
    serves the cluster's schemas."""
    shared = secure.client("alice").register_schema("standalone-tls-value", avro("Alone"))
    url = f"https://127.0.0.1:{free_port()}"
    keystore = secure.certs["broker"].keystore
    users = tmp_path / "users.properties"
    users.write_text("# Jetty's format\ndave: dave-secret,admin\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "moldau", "registry", "-b", secure.bootstrap, "--listener", url]
        + ["-L", "ssl.keystore.type=PEM", "-L", f"ssl.keystore.location={keystore}"]
        + ["-L", "ssl.truststore.type=PEM", "-L", f"ssl.truststore.location={secure.ca}"]
        + ["--basic-auth-users", str(users)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        config = {"url": url, "ssl.ca.location": secure.ca}
        client = SchemaRegistryClient({**config, "basic.auth.user.info": "dave:dave-secret"})
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                found = client.get_latest_version("standalone-tls-value")
                break
            except Exception:  # not serving yet: refused, or 404 until it caught up
                assert process.poll() is None, "the standalone registry exited"
                assert time.monotonic() < deadline, "the standalone registry never served"
                time.sleep(0.5)
        assert found.schema_id == shared
        for info in (None, "dave:wrong", "alice:alice-secret"):  # alice: a broker user only
            extra = {"basic.auth.user.info": info} if info else {}
            with pytest.raises(SchemaRegistryError) as refused:
                SchemaRegistryClient({**config, **extra}).get_subjects()
            assert refused.value.http_status_code == 401, info
    finally:
        process.terminate()
        output = process.communicate(timeout=60)[0].decode(errors="replace")
    assert process.returncode in (0, -15), output


@pytest.mark.slow
def test_writes_forwarded_over_https_with_the_callers_credentials(tmp_path: Path) -> None:
    """Two nodes: a write to the node that is not the primary goes to the primary over
    https (verified with ssl.truststore.*) with the caller's Authorization, checked again
    there; bad credentials stop at the first node."""
    certs = standard_pki(tmp_path / "pki")
    ca = str(certs["pki"].ca_file)
    c = ClusterProcess(
        nodes=2,
        configs={
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs["broker"].keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca,
            "schema.registry.authentication.method": "BASIC",
        },
    )
    urls = {}
    for node_id, node in c.nodes.items():
        urls[node_id] = f"https://127.0.0.1:{free_port()}"
        node.configs["schema.registry.listeners"] = urls[node_id]
    with c:
        create_scram_users(c.bootstrap_servers, {}, {"alice": PASSWORDS["alice"]})
        primary = primary_node(c, urls)
        other = next(i for i in urls if i != primary)
        config = {"url": urls[other], "ssl.ca.location": ca}
        alice = SchemaRegistryClient({**config, "basic.auth.user.info": "alice:alice-secret"})
        deadline = time.monotonic() + DEADLINE_S
        while True:  # until the SCRAM users reached the node
            try:
                schema_id = alice.register_schema("forwarded-value", avro("Forwarded"))
                break
            except SchemaRegistryError as e:
                assert e.http_status_code == 401 and time.monotonic() < deadline, e
                time.sleep(0.5)
        primary_client = SchemaRegistryClient(
            {
                "url": urls[primary],
                "ssl.ca.location": ca,
                "basic.auth.user.info": "alice:alice-secret",
            }
        )
        assert primary_client.get_latest_version("forwarded-value").schema_id == schema_id
        intruder = SchemaRegistryClient({**config, "basic.auth.user.info": "alice:wrong"})
        with pytest.raises(SchemaRegistryError) as refused:
            intruder.register_schema("forwarded-value", avro("Intruder"))
        assert refused.value.http_status_code == 401


def test_in_server_registry_logs_in_over_sasl_ssl(tmp_path: Path) -> None:
    """A broker whose only client listener is SASL_SSL: the registry's own client logs in
    with `schema.registry.kafkastore.*` (PLAIN as carol), trusting the broker's CA from the
    listener's ssl.truststore.*."""
    certs = standard_pki(tmp_path / "pki")
    ca = str(certs["pki"].ca_file)
    users = {f"user_{u}": p for u, p in PASSWORDS.items()}
    url = f"http://127.0.0.1:{free_port()}"
    store = "schema.registry.kafkastore."
    broker = Listeners(
        tmp_path / "broker",
        {"SECURE": "SASL_SSL"},
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs["broker"].keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca,
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": jaas(
                PLAIN_JAAS, username="admin", password=PASSWORDS["admin"], **users
            ),
            "schema.registry.listeners": url,
            f"{store}security.protocol": "SASL_SSL",
            f"{store}sasl.mechanism": "PLAIN",
            f"{store}sasl.jaas.config": jaas(
                PLAIN_JAAS, username="carol", password=PASSWORDS["carol"]
            ),
        },
    )
    broker.start()
    try:
        client = SchemaRegistryClient({"url": url})
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                schema_id = client.register_schema("over-sasl-value", avro("OverSasl"))
                break
            except Exception:  # not serving yet
                assert time.monotonic() < deadline, broker.lines()
                time.sleep(0.5)
        got = client.get_schema(schema_id).schema_str
        assert json.loads(got) == json.loads(avro("OverSasl").schema_str)
    finally:
        broker.close()
