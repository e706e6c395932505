"""The standard authorizer: Kafka's rules over the ACLs of the metadata image.

An action (principal, client host, operation, resource type and name) is decided as
Kafka's StandardAuthorizer decides it:

* a super user (``super.users``) may do anything;
* the ACLs that apply to the resource are the LITERAL ones of its name, the LITERAL
  ``*`` ones of its type and the PREFIXED ones whose prefix starts its name;
* among those, an ACL matches when its principal is the caller's or ``User:*``, its host
  is the caller's address or ``*``, and its operation is the action's or ALL; an ALLOW
  ACL for READ, WRITE, DELETE or ALTER also matches DESCRIBE, and one for ALTER_CONFIGS
  matches DESCRIBE_CONFIGS (implications never widen a DENY);
* a matching DENY wins; else a matching ALLOW allows; else, if no ACL applies to the
  resource at all, ``allow.everyone.if.no.acl.found`` decides; else it is denied.

:class:`AclIndex` is built once per set of ACLs (dicts by literal name and by prefix
length), so an authorization costs a few dict lookups, not a scan of every ACL.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from moldau.metadata.security import StandardAcl
from moldau.security.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    KafkaPrincipal,
    PatternType,
    ResourceType,
    parse_principal,
)

audit = logging.getLogger("moldau.authorizer")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class AclIndex:
    """The ACLs of one image, indexed by what a resource name can match."""

    def __init__(self, acls: Iterable[StandardAcl]) -> None:
        self.acls = list(acls)
        self._literal: dict[tuple[int, str], list[StandardAcl]] = defaultdict(list)
        self._prefixed: dict[tuple[int, str], list[StandardAcl]] = defaultdict(list)
        lengths: dict[int, set[int]] = defaultdict(set)
        for acl in self.acls:
            if acl.pattern_type == PatternType.LITERAL:
                self._literal[(acl.resource_type, acl.resource_name)].append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                self._prefixed[(acl.resource_type, acl.resource_name)].append(acl)
                lengths[acl.resource_type].add(len(acl.resource_name))
        self._prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}

    def applying_to(self, resource_type: int, name: str) -> list[StandardAcl]:
        """Every ACL whose pattern covers ``name`` (whatever its principal or operation)."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found += self._prefixed.get((resource_type, name[:length]), ())
        return found


def acl_result(
    acl: StandardAcl, principal: str, host: str, operation: AclOperation
) -> AclPermissionType | None:
    """What ``acl`` says about the action (None: it does not match it)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return AclPermissionType(acl.permission_type)


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False

    @classmethod
    def parse(cls, super_users: str, allow_everyone_if_no_acl_found: bool) -> AuthorizerConfig:
        """``super.users`` is ``User:a;User:b``; each entry must be a principal."""
        users = frozenset(u.strip() for u in super_users.split(";") if u.strip())
        for u in users:
            parse_principal(u)
        return cls(users, allow_everyone_if_no_acl_found)


class StandardAuthorizer:
    """Decisions over one :class:`AclIndex`; :meth:`update` swaps in new ACLs."""

    def __init__(self, config: AuthorizerConfig, acls: Mapping[bytes, StandardAcl]) -> None:
        self.config = config
        self._source = acls
        self.index = AclIndex(acls.values())

    def update(self, acls: Mapping[bytes, StandardAcl]) -> None:
        if acls is not self._source:
            self._source = acls
            self.index = AclIndex(acls.values())

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        who = str(principal)
        if who in self.config.super_users:
            return True
        applying = self.index.applying_to(resource_type, name)
        allowed = False
        for acl in applying:
            result = acl_result(acl, who, host, operation)
            if result == AclPermissionType.DENY:
                allowed = False
                break
            if result == AclPermissionType.ALLOW:
                allowed = True
        else:
            if not applying:
                allowed = self.config.allow_if_no_acl
        if not allowed and log_denied:
            audit.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                who,
                operation.name,
                host,
                resource_type.name,
                name,
            )
        return allowed

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do ``operation`` on *some* resource of the type? (Kafka's
        default Authorizer.authorizeByResourceType: an ALLOW pattern not covered by a DENY
        of the same literal name or of a prefix of it.)"""
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_denied=False):
            return True
        who = str(principal)
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow: list[tuple[int, str]] = []
        for acl in self.index.acls:
            if acl.resource_type != resource_type:
                continue
            if acl.host not in (host, WILDCARD) or acl.principal not in (who, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                elif acl.pattern_type == PatternType.PREFIXED:
                    deny_prefix.add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return True
                allow.append((acl.pattern_type, acl.resource_name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefix for n in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit field (1 << operation code) of what the principal may do on it."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name, log_denied=False):
                bits |= 1 << op
        return bits
