"""Kafka's ACL vocabulary: principals, resource types, patterns, operations, filters.

The codes are the wire's (and the metadata records'): ``AclOperation.READ`` is 3 in a
CreateAcls request, in an AccessControlEntryRecord and in an authorized-operations bit
field. Filters (DescribeAcls, DeleteAcls) match as Kafka's ``AclBindingFilter`` does,
including the MATCH pattern type that finds every pattern applying to a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from moldau.metadata.security import StandardAcl

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW ACL for any of these operations also allows DESCRIBE (resp. DESCRIBE_CONFIGS).
IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
     AclOperation.ALTER}
)  # fmt: skip
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# What each resource type can be authorized for (Kafka's AclEntry.supportedOperations):
# the bits of an authorized-operations field.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
WILDCARD_PRINCIPAL = "User:*"


def parse_principal(text: str) -> KafkaPrincipal:
    """``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError otherwise."""
    kind, sep, name = text.partition(":")
    if not text or not sep:
        raise ValueError(
            f"expected a string in format principalType:principalName but got {text!r}"
        )
    return KafkaPrincipal(kind, name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None matches any name, principal or host."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        """Kafka refuses such a filter: a code it does not know, or UNKNOWN itself."""
        return any(
            value == 0 or not _known(enum, value)
            for enum, value in (
                (ResourceType, self.resource_type),
                (PatternType, self.pattern_type),
                (AclOperation, self.operation),
                (AclPermissionType, self.permission_type),
            )
        )

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: every pattern that applies to the name.
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (self.resource_name, WILDCARD)
        return self.resource_name.startswith(acl.resource_name)

    def _matches_entry(self, acl: StandardAcl) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )


def new_acl_error(acl: StandardAcl) -> str | None:
    """Why ``acl`` cannot be created (Kafka's broker and controller checks), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or not _known(
        ResourceType, acl.resource_type
    ):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or not _known(
        AclOperation, acl.operation
    ):
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {_name(AclPermissionType, acl.permission_type)}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    try:
        parse_principal(acl.principal)
    except ValueError as e:
        return str(e)
    return None


def _known(enum: type[IntEnum], value: int) -> bool:
    return value in enum._value2member_map_


def _name(enum: type[IntEnum], value: int) -> str:
    return enum(value).name if _known(enum, value) else str(value)
