"""What request handlers ask: may this request's principal do that?

One object per broker (``services.authorizer``), a metadata listener that keeps the
standard authorizer on the image's ACLs. Without ``authorizer.class.name`` everything
is allowed, as in Kafka without an authorizer. Handlers call it with their request
context (principal and client address) and Kafka's operation and resource type, e.g.
``services.authorizer.allowed(ctx, WRITE, TOPIC, name)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from moldau.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    KafkaPrincipal,
    ResourceType,
)
from moldau.security.authorizer import STANDARD_AUTHORIZER, AuthorizerConfig, StandardAuthorizer

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig
    from moldau.metadata.image import MetadataImage
    from moldau.metadata.publisher import LocalChanges

# Kafka's default for the authorized-operations fields when they were not asked for.
OPERATIONS_NOT_REQUESTED = -(2**31)


class Caller(Protocol):
    """The part of a request context authorization looks at."""

    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def client_host(self) -> str: ...


class Access:
    def __init__(self, authorizer: StandardAuthorizer | None = None) -> None:
        self.authorizer = authorizer

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Access:
        """``authorizer.class.name``: empty (no authorizer) or Kafka's standard one."""
        name = config.get("authorizer.class.name").strip()
        if not name:
            return cls()
        settings = AuthorizerConfig.parse(
            config.get("super.users"), config.bool("allow.everyone.if.no.acl.found")
        )
        assert name == STANDARD_AUTHORIZER, "checked by BrokerConfig"
        return cls(StandardAuthorizer(settings, {}))

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        self.load(new)

    def load(self, image: MetadataImage) -> None:
        """Decide on ``image``'s ACLs from now on (nothing to do if they did not change)."""
        if self.authorizer is not None:
            self.authorizer.update(image.security.acls)

    def allowed(
        self,
        ctx: Caller,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            ctx.principal, ctx.client_host, operation, resource_type, name, log_denied=log_denied
        )

    def allowed_names(
        self,
        ctx: Caller,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_denied: bool = True,
    ) -> set[str]:
        """The names (each decided once) the principal may do ``operation`` on."""
        return {
            n
            for n in set(names)
            if self.allowed(ctx, operation, resource_type, n, log_denied=log_denied)
        }

    def cluster(self, ctx: Caller, operation: AclOperation, *, log_denied: bool = True) -> bool:
        return self.allowed(
            ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied
        )

    def creatable(self, ctx: Caller, names: Iterable[str]) -> set[str]:
        """Topics the principal may create: CREATE on the cluster, or on the topic."""
        if self.cluster(ctx, AclOperation.CREATE, log_denied=False):
            return set(names)
        return self.allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)

    def idempotent_write(self, ctx: Caller) -> bool:
        """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or
        WRITE on any topic (Kafka 2.8+, KIP-679)."""
        if self.authorizer is None or self.cluster(
            ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False
        ):
            return True
        return self.authorizer.authorize_by_resource_type(
            ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
        )

    def operations(self, ctx: Caller, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field for the resource."""
        if self.authorizer is None:
            return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
        return self.authorizer.authorized_operations(
            ctx.principal, ctx.client_host, resource_type, name
        )
