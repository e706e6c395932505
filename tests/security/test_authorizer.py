"""The standard authorizer against Kafka's rules: examples, then random ACL sets checked
against a reference model that applies the rules literally, ACL by ACL."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.metadata.image import MetadataImage
from moldau.metadata.security import StandardAcl
from moldau.security.acl import (
    SUPPORTED_OPERATIONS,
    AclFilter,
    AclOperation,
    AclPermissionType,
    KafkaPrincipal,
    PatternType,
    ResourceType,
    new_acl_error,
    parse_principal,
)
from moldau.security.authorizer import AuthorizerConfig, StandardAuthorizer

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(
    op: Op,
    name: str = "orders",
    *,
    res: Res = Res.TOPIC,
    pattern: Pat = Pat.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    perm: Perm = Perm.ALLOW,
) -> StandardAcl:
    return StandardAcl(res, name, pattern, principal, host, op, perm)


def authorizer(*acls: StandardAcl, supers: str = "", allow_if_none: bool = False):
    return StandardAuthorizer(
        AuthorizerConfig.parse(supers, allow_if_none), {uuid.uuid4().bytes: a for a in acls}
    )


def can(
    a: StandardAuthorizer, op: Op, name: str = "orders", *, who=ALICE, host=HOST, res=Res.TOPIC
):
    return a.authorize(who, host, op, res, name)


def test_no_acl_denies_unless_allow_everyone():
    assert not can(authorizer(), Op.READ)
    assert can(authorizer(allow_if_none=True), Op.READ)
    # An ACL for someone else on the resource turns the default off.
    assert not can(authorizer(acl(Op.READ, principal="User:bob"), allow_if_none=True), Op.READ)


def test_super_users_bypass_deny():
    a = authorizer(acl(Op.ALL, perm=Perm.DENY), supers="User:admin; User:alice")
    assert can(a, Op.DELETE)
    assert not can(a, Op.DELETE, who=BOB)


def test_deny_wins_and_implications_only_widen_allow():
    a = authorizer(acl(Op.READ), acl(Op.WRITE, perm=Perm.DENY))
    assert can(a, Op.READ)
    assert can(a, Op.DESCRIBE)  # READ implies DESCRIBE
    assert not can(a, Op.WRITE)
    # A DENY of READ does not deny DESCRIBE; a DENY of ALL denies everything.
    assert can(authorizer(acl(Op.DESCRIBE), acl(Op.READ, perm=Perm.DENY)), Op.DESCRIBE)
    assert not can(authorizer(acl(Op.READ), acl(Op.ALL, perm=Perm.DENY)), Op.READ)
    assert can(authorizer(acl(Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not can(authorizer(acl(Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)


def test_patterns_wildcards_and_hosts():
    a = authorizer(
        acl(Op.READ, "ord", pattern=Pat.PREFIXED),
        acl(Op.WRITE, "*", principal="User:*"),
        acl(Op.DELETE, "orders", host="10.0.0.2"),
    )
    assert can(a, Op.READ, "orders") and can(a, Op.READ, "ord")
    assert not can(a, Op.READ, "or")
    assert can(a, Op.WRITE, "anything", who=BOB)
    assert not can(a, Op.DELETE, "orders")  # another host
    assert can(a, Op.DELETE, "orders", host="10.0.0.2")
    # A literal ACL named like a prefix of the resource does not apply to it.
    assert not can(authorizer(acl(Op.READ, "ord")), Op.READ, "orders")


def test_by_resource_type_is_kafkas():
    def by_type(*acls: StandardAcl) -> bool:
        return authorizer(*acls).authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)

    assert not by_type()
    assert by_type(acl(Op.WRITE, "t1"))
    assert not by_type(acl(Op.WRITE, "t1"), acl(Op.WRITE, "t1", perm=Perm.DENY))
    assert not by_type(
        acl(Op.WRITE, "abc"), acl(Op.WRITE, "ab", pattern=Pat.PREFIXED, perm=Perm.DENY)
    )
    assert by_type(acl(Op.WRITE, "abc"), acl(Op.WRITE, "abd", pattern=Pat.PREFIXED, perm=Perm.DENY))
    assert not by_type(acl(Op.WRITE, "t1"), acl(Op.WRITE, "*", perm=Perm.DENY))
    assert not by_type(acl(Op.READ, "t1"))


def test_authorized_operations_bits():
    a = authorizer(acl(Op.READ))
    bits = a.authorized_operations(ALICE, HOST, Res.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    everything = authorizer(supers="User:alice").authorized_operations(ALICE, HOST, Res.GROUP, "g")
    assert everything == sum(1 << op for op in SUPPORTED_OPERATIONS[Res.GROUP])


def test_filters_match_as_kafka():
    lit, pre, star = (
        acl(Op.READ, "orders"),
        acl(Op.READ, "ord", pattern=Pat.PREFIXED),
        acl(Op.READ, "*"),
    )
    match = AclFilter(Res.TOPIC, "orders", Pat.MATCH)
    assert [match.matches(x) for x in (lit, pre, star)] == [True, True, True]
    assert [AclFilter(Res.TOPIC, "orders", Pat.ANY).matches(x) for x in (lit, pre, star)] == [
        True,
        False,
        False,
    ]
    assert AclFilter(pattern_type=Pat.PREFIXED).matches(pre) and not AclFilter(
        pattern_type=Pat.PREFIXED
    ).matches(lit)
    assert not AclFilter(principal="User:bob").matches(lit)
    assert AclFilter(operation=Op.UNKNOWN).is_unknown() and not AclFilter().is_unknown()


def test_new_acl_validation():
    assert new_acl_error(acl(Op.READ)) is None
    assert "CLUSTER" in (new_acl_error(acl(Op.ALTER, "c", res=Res.CLUSTER)) or "")
    assert new_acl_error(acl(Op.ANY)) == "Invalid operation ANY"
    assert new_acl_error(acl(Op.READ, pattern=Pat.MATCH)) == "Invalid patternType MATCH"
    assert new_acl_error(acl(Op.READ, "")) == "Invalid empty resource name"
    assert "principalType:principalName" in (new_acl_error(acl(Op.READ, principal="alice")) or "")
    assert parse_principal("User:a:b") == KafkaPrincipal("User", "a:b")


def test_acls_live_in_the_image():
    from moldau.protocol.metadata_records.remove_access_control_entry_record import (
        RemoveAccessControlEntryRecord,
    )

    one, two = uuid.uuid4().bytes, uuid.uuid4().bytes
    image = MetadataImage().apply([acl(Op.READ).to_record(one), acl(Op.WRITE).to_record(two)])
    assert set(image.security.acls) == {one, two}
    same = image.apply([])
    assert same.security is image.security
    after = image.apply([RemoveAccessControlEntryRecord(id=one)])
    assert set(after.security.acls) == {two}
    assert after.security.scram is image.security.scram  # untouched parts keep identity


# --- random ACL sets against a literal reading of the rules -----------------------------

NAMES = ["a", "ab", "abc", "b", "ba", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]
RESOURCES = [Res.TOPIC, Res.GROUP, Res.CLUSTER, Res.TRANSACTIONAL_ID, Res.DELEGATION_TOKEN]

acls_strategy = st.lists(
    st.builds(
        StandardAcl,
        st.sampled_from(RESOURCES),
        st.sampled_from(NAMES),
        st.sampled_from([Pat.LITERAL, Pat.PREFIXED]),
        st.sampled_from(PRINCIPALS),
        st.sampled_from(HOSTS),
        st.sampled_from(OPS),
        st.sampled_from([Perm.ALLOW, Perm.DENY]),
    ),
    max_size=12,
)


def reference(
    acls: list[StandardAcl],
    supers: set[str],
    allow_if_none: bool,
    who: str,
    host: str,
    op: Op,
    res: Res,
    name: str,
) -> bool:
    """Kafka's documented rules, applied to every ACL in turn."""
    if who in supers:
        return True

    def covers(a: StandardAcl) -> bool:
        if a.resource_type != res:
            return False
        if a.pattern_type == Pat.LITERAL:
            return a.resource_name == name or a.resource_name == "*"
        return name.startswith(a.resource_name)

    def grants(a: StandardAcl, permission: Perm) -> bool:
        if a.permission_type != permission or a.principal not in (who, "User:*"):
            return False
        if a.host not in ("*", host):
            return False
        if a.operation in (Op.ALL, op):
            return True
        if permission == Perm.DENY:
            return False
        implied = {
            Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
            Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
        }
        return a.operation in implied.get(op, set())

    applying = [a for a in acls if covers(a)]
    if any(grants(a, Perm.DENY) for a in applying):
        return False
    if any(grants(a, Perm.ALLOW) for a in applying):
        return True
    return allow_if_none and not applying


@settings(max_examples=400, deadline=None)
@given(
    acls=acls_strategy,
    supers=st.sets(st.sampled_from(["User:alice", "User:carol"]), max_size=1),
    allow_if_none=st.booleans(),
    who=st.sampled_from(["User:alice", "User:bob", "Group:alice"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(OPS),
    res=st.sampled_from(RESOURCES),
    name=st.sampled_from(NAMES + ["abcd", "c"]),
)
def test_random_acls_match_the_reference(acls, supers, allow_if_none, who, host, op, res, name):
    a = StandardAuthorizer(
        AuthorizerConfig(frozenset(supers), allow_if_none),
        {uuid.uuid4().bytes: x for x in acls},
    )
    got = a.authorize(parse_principal(who), host, op, res, name, log_denied=False)
    want = reference(acls, supers, allow_if_none, who, host, op, res, name)
    assert not (got and not want), "granted what Kafka's rules deny"
    assert got == want
