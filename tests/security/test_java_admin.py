"""The Java Admin client (kafka-clients) on the security APIs, over SASL_SSL as a super
user: ACLs, client quotas and SCRAM users created, described and deleted; what it creates
takes effect (a SCRAM user can log in, an ACL shuts others out)."""

from __future__ import annotations

from typing import Any

from moldau.protocol.errors import ErrorCode as E
from tests.java.client import JavaClient
from tests.security.raw import SaslRawClient
from tests.security.secure import Listeners, Login


def test_security_admin_apis(java: JavaClient, secured: Listeners, login: dict[str, Login]) -> None:
    admin = login["sasl-ssl-scram512"].as_user("admin", "admin-secret").java()
    result = java.admin(
        secured.bootstrap("SASL_SSL"),
        ["create-acl", "--resource-type", "TOPIC", "--name", "java-", "--pattern", "PREFIXED",
         "--principal", "User:alice", "--operation", "READ", *admin],
        ["create-acl", "--resource-type", "DELEGATION_TOKEN", "--name", "token-1",
         "--principal", "User:alice", "--operation", "DESCRIBE"],
        ["describe-acls", "--principal", "User:alice"],
        ["alter-quota", "--entity", "user=alice", "--entity", "client-id=", "--set", "producer_byte_rate=1024"],
        ["alter-quota", "--entity", "client-id=java-app", "--set", "request_percentage=25.5"],
        ["describe-quotas"],
        ["upsert-scram", "--user", "java-user", "--password", "java-pw", "--mechanism", "SCRAM-SHA-512",
         "--iterations", "8192"],
        ["describe-scram"],
        ["delete-acls", "--resource-type", "DELEGATION_TOKEN", "--name", "token-1"],
        ["describe-acls", "--principal", "User:alice"],
    ).check()  # fmt: skip
    described = result.of("describe-acls")
    assert {(a["resource_type"], a["name"], a["pattern"], a["operation"]) for a in described[0]["acls"]} >= {
        ("TOPIC", "java-", "PREFIXED", "READ"), ("DELEGATION_TOKEN", "token-1", "LITERAL", "DESCRIBE")
    }  # fmt: skip
    assert not any(a["resource_type"] == "DELEGATION_TOKEN" for a in described[1]["acls"])
    assert [a["name"] for a in result.one("delete-acls")["deleted"]] == ["token-1"]
    quotas = {
        tuple(sorted(q["entity"].items(), key=str)): q["values"]
        for q in result.one("describe-quotas")["quotas"]
    }
    assert quotas[(("client-id", None), ("user", "alice"))] == {"producer_byte_rate": 1024.0}
    assert quotas[(("client-id", "java-app"),)] == {"request_percentage": 25.5}
    users = result.one("describe-scram")["users"]
    assert users["java-user"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    with SaslRawClient(secured.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.login("SCRAM-SHA-512", "java-user", "java-pw").error_code == E.NONE


def test_java_admin_without_permission(
    java: JavaClient, secured: Listeners, login: dict[str, Any]
) -> None:
    """Once the cluster has an ACL (allow.everyone.if.no.acl.found no longer applies to it),
    alice, no super user, gets CLUSTER_AUTHORIZATION_FAILED, as the Java client reports it."""
    admin = login["sasl-plain"].as_user("admin", "admin-secret").java()
    java.admin(secured.bootstrap("SASL_PLAINTEXT"), ["create-acl", "--resource-type", "CLUSTER", "--name",
               "kafka-cluster", "--principal", "User:carol", "--operation", "DESCRIBE", *admin]).check()  # fmt: skip
    alice = login["sasl-plain"].java()
    result = java.admin(secured.bootstrap("SASL_PLAINTEXT"), ["describe-scram", *alice])
    assert result.returncode == 1
    assert "ClusterAuthorizationException" in str(result), result
