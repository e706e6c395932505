"""Security on a KRaft cluster: clients, brokers and controllers each on their own secured
listener, as Kafka configures them.

Three combined nodes; clients use CLIENT (SASL_SSL, SCRAM and PLAIN), replicas fetch over
INTERNAL (``inter.broker.listener.name``), and Raft, broker registration and heartbeats go
over CONTROLLER. Two layouts: INTERNAL SASL_SSL (PLAIN) with CONTROLLER SSL (client
certificates required), and INTERNAL SSL (client certificates) with CONTROLLER
SASL_PLAINTEXT (PLAIN); nodes are ``User:broker`` either way (their certificate's CN, or
their SASL user). With the standard authorizer and no ACL for anonymous users, records
produced with acks=all to a topic that needs all three replicas in sync only get through if
every one of these paths authenticated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.cli.local_cluster import free_ports
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.security.client import ClientSecurity
from moldau.security.listeners import SecurityProtocol
from moldau.security.tls import client_context
from moldau.testing.cluster import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS, BrokerProcess
from tests.integration.helpers import (
    assert_log_matches,
    consume_confluent,
    make_records,
    produce_confluent,
)
from tests.security.conftest import MAPPING
from tests.security.secure import PLAIN_JAAS, Login, create_scram_users, jaas, watermarks

NODES = 3
BROKER_PASSWORD = "broker-secret"
REAUTH_MS = 3_000


# (INTERNAL, CONTROLLER) protocols; the SASL one logs nodes in with PLAIN, the SSL one
# asks for their certificates.
LAYOUTS = [("SASL_SSL", "SSL"), ("SSL", "SASL_PLAINTEXT")]


def node_configs(
    certs: dict[str, Any], keystore: str, internal: str, controller: str
) -> dict[str, str]:
    client_users = jaas(PLAIN_JAAS, user_admin="admin-secret")
    # A node's own login, and the users it admits: brokers (and alice, to show that a
    # login alone does not make a broker).
    nodes = jaas(PLAIN_JAAS, username="broker", password=BROKER_PASSWORD,
                 user_broker=BROKER_PASSWORD, user_alice="alice-secret")  # fmt: skip
    sasl, tls = (
        ("internal", "controller") if internal.startswith("SASL") else ("controller", "internal")
    )
    return {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": f"CLIENT:SASL_SSL,INTERNAL:{internal},CONTROLLER:{controller}",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": client_users,
        f"listener.name.{sasl}.plain.sasl.jaas.config": nodes,
        f"listener.name.{tls}.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs["pki"].ca_file),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:admin",
        # SASL sessions (clients', and nodes' on the SASL listener) last 3 s: nodes log in
        # again on fresh connections before theirs end (KIP-368).
        "connections.max.reauth.ms": str(REAUTH_MS),
    }


@pytest.fixture(
    scope="module", params=LAYOUTS, ids=[f"internal-{i}-controller-{c}" for i, c in LAYOUTS]
)
def secure_cluster(
    certs: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[ClusterProcess]:
    internal, controller = request.param
    # CN=broker: User:broker
    node_cert = certs["pki"].issue(f"node-{internal}-{controller}", "broker", server=True)
    configs = node_configs(certs, str(node_cert.keystore), internal, controller)
    c = ClusterProcess(NODES, configs=configs)
    internal = free_ports(NODES)
    for spec, port in zip(c.layout.nodes, internal, strict=True):
        c.nodes[spec.node_id].configs["listeners"] = (
            f"CLIENT://127.0.0.1:{spec.client_port},INTERNAL://127.0.0.1:{port},"
            f"CONTROLLER://127.0.0.1:{spec.controller_port}"
        )
    with c:
        yield c


def logins(certs: dict[str, Any]) -> tuple[Login, Login]:
    ca = certs["pki"].ca_file
    admin = Login("CLIENT", "SASL_SSL", ca, None, "PLAIN", "admin", "admin-secret")
    alice = Login("CLIENT", "SASL_SSL", ca, None, "SCRAM-SHA-512", "alice", "alice-secret")
    return admin, alice


def leaders(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR) as the cluster answers over its client listener."""
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    return {p.id: (p.leader.id if p.leader else -1, sorted(r.id for r in p.isr))
            for p in described.partitions}  # fmt: skip


def alice_may_describe(c: ClusterProcess, node: int, certs: dict[str, Any], topic: str) -> bool:
    """Node ``node`` knows alice's SCRAM credentials (she logs in) and her ACLs on ``topic``."""
    tls = client_context(
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs["pki"].ca_file)}.get
    )
    security = ClientSecurity(
        SecurityProtocol.SASL_SSL, tls, "SCRAM-SHA-512", "alice", "alice-secret"
    )

    async def ask() -> bool:
        client = NetworkClient("alice", security=security)
        try:
            request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
            response = await client.send(("127.0.0.1", c.nodes[node].port), request, 12)
            return bool(response.topics[0].error_code == 0)
        finally:
            client.close()

    return bool(asyncio.run(ask()))


def test_clients_brokers_and_controllers_each_on_a_secured_listener(
    secure_cluster: ClusterProcess, certs: dict[str, Any], topic: str
) -> None:
    c = secure_cluster
    bootstrap = c.bootstrap_servers
    admin_login, alice = logins(certs)
    admin = AdminClient({"bootstrap.servers": bootstrap, **admin_login.librdkafka()})
    create_scram_users(bootstrap, admin_login.librdkafka(), {"alice": "alice-secret"})
    config = {"min.insync.replicas": str(NODES)}  # acks=all needs both followers in sync
    admin.create_topics([NewTopic(topic, 2, NODES, config=config)])[topic].result(timeout=30)
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
                for kind, name in ((ResourceType.TOPIC, topic), (ResourceType.GROUP, "*"))]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)

    # SCRAM credentials and ACLs reach each broker through the metadata log, as in Kafka
    # some time after the controller answered.
    c.wait_until(lambda: all(alice_may_describe(c, i, certs, topic) for i in c.serving()), 60)

    records = make_records(300, seed=5)
    acked = produce_confluent(bootstrap, topic, records, "lz4", **alice.librdkafka(), acks="all")
    consumed = consume_confluent(
        bootstrap, topic, watermarks(bootstrap, alice, topic), **alice.librdkafka()
    )
    assert_log_matches(records, consumed, acked=acked)
    assert all(isr == [1, 2, 3] for _, isr in leaders(admin, topic).values())

    # The leader of partition 0 shuts down (its heartbeats over CONTROLLER ask to); the
    # new leaders serve what was replicated to them over INTERNAL.
    stopped = leaders(admin, topic)[0][0]
    assert c.stop(stopped) == 0
    c.wait_until(lambda: all(leader not in (-1, stopped) for leader, _ in
                             leaders(admin, topic).values()), 60)  # fmt: skip
    survivors = ",".join(c.nodes[i].bootstrap_servers for i in c.serving())

    def ends() -> dict[int, tuple[int, int]] | None:
        # Until every node has the new leaders, and a new leader knows its high watermark
        # (once its follower fetched again): NOT_LEADER, OFFSET_NOT_AVAILABLE.
        try:
            return watermarks(survivors, alice, topic)
        except KafkaException:
            return None

    consumed = consume_confluent(survivors, topic, c.wait_until(ends, 60), **alice.librdkafka())
    assert_log_matches(records, consumed, acked=acked)
    for node in c.nodes.values():
        node.settle_output()
        assert not [line for line in node.output if "session expired" in line]


def test_controller_listener_admits_only_nodes(
    secure_cluster: ClusterProcess, certs: dict[str, Any]
) -> None:
    """Alice authenticates on a controller listener (with a certificate the CA signed, or
    with a password it knows) but may not act as a broker (CLUSTER_AUTHORIZATION_FAILED);
    without a certificate, or with a wrong password, there is no session at all."""
    voter = min(c for c in secure_cluster.serving())
    spec = next(s for s in secure_cluster.layout.nodes if s.node_id == voter)
    destination = ("127.0.0.1", spec.controller_port)
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs["pki"].ca_file)}
    with_cert = {**trust, "ssl.keystore.type": "PEM",
                 "ssl.keystore.location": str(certs["alice"].keystore)}  # fmt: skip
    if secure_cluster.nodes[voter].configs["listener.security.protocol.map"].endswith(":SSL"):
        alice = ClientSecurity(SecurityProtocol.SSL, client_context(with_cert.get))
        intruder = ClientSecurity(SecurityProtocol.SSL, client_context(trust.get))
    else:
        plain = SecurityProtocol.SASL_PLAINTEXT
        alice = ClientSecurity(plain, None, "PLAIN", "alice", "alice-secret")
        intruder = ClientSecurity(plain, None, "PLAIN", "alice", "wrong")
    heartbeat = BrokerHeartbeatRequest(broker_id=voter, broker_epoch=-1)

    async def run() -> None:
        client = NetworkClient("not-a-broker", security=alice)
        try:
            response = await client.send(destination, heartbeat, 0)
            assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        finally:
            client.close()
        client = NetworkClient("intruder", security=intruder)
        try:
            with pytest.raises(ConnectionError):
                await client.send(destination, heartbeat, 0)
        finally:
            client.close()

    asyncio.run(run())
    assert secure_cluster.serving(), "the cluster kept serving"


def test_dedicated_controller_and_broker(certs: dict[str, Any], tmp_path: Path) -> None:
    """A controller-only node (SASL_PLAINTEXT controller listener; it authorizes on its own
    committed metadata) and a broker-only node (SASL_SSL clients, mTLS inter-broker)."""
    node_cert = certs["pki"].issue("node-dedicated", "broker", server=True)
    controller_port, client_port, internal_port = free_ports(3)
    common = {
        **node_configs(certs, str(node_cert.keystore), "SSL", "SASL_PLAINTEXT"),
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "offsets.topic.replication.factor": "1",
    }
    controller = BrokerProcess(tmp_path / "controller", {
        **common, "process.roles": "controller", "node.id": "1",
        "listeners": f"CONTROLLER://127.0.0.1:{controller_port}"})  # fmt: skip
    broker = BrokerProcess(tmp_path / "broker", {
        **common, "process.roles": "broker", "node.id": "2",
        "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}"})  # fmt: skip
    try:
        started = [(p, p.launch()) for p in (controller, broker)]  # the broker waits for it
        for process, listening in started:
            process.wait_listening(listening)
        admin, _ = logins(certs)
        bootstrap = broker.bootstrap_servers
        client = AdminClient({"bootstrap.servers": bootstrap, **admin.librdkafka()})
        client.create_topics([NewTopic("orders", 2, 1)])["orders"].result(timeout=30)
        records = make_records(100, seed=3)
        acked = produce_confluent(bootstrap, "orders", records, **admin.librdkafka())
        ends = watermarks(bootstrap, admin, "orders")
        consumed = consume_confluent(bootstrap, "orders", ends, **admin.librdkafka())
        assert_log_matches(records, consumed, acked=acked)
    finally:
        broker.close()
        controller.close()
