"""What request handlers may use: a narrow view of the node, never the node itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.security.access import Access
from moldau.security.quotas import ClientQuotas

if TYPE_CHECKING:
    from moldau.clock import Clock
    from moldau.config.broker import BrokerConfig
    from moldau.coordinator.group.service import GroupCoordinatorService
    from moldau.coordinator.share.service import ShareGroupService
    from moldau.coordinator.share_state.service import ShareCoordinatorService
    from moldau.coordinator.txn.service import TransactionCoordinatorService
    from moldau.metadata.image import MetadataImage
    from moldau.metadata.publisher import MetadataPublisher
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.server.dynamic_config import DynamicBrokerConfig
    from moldau.server.fetch_session import FetchSessionCache
    from moldau.server.node_to_controller import NodeToControllerChannel
    from moldau.server.producer_ids import ProducerIdManager
    from moldau.server.schema_validation import SchemaValidation
    from moldau.server.share_session import ShareSessionCache


@dataclass(frozen=True)
class Services:
    config: BrokerConfig
    node_id: int
    clock: Clock
    metadata: MetadataPublisher
    dynamic_config: DynamicBrokerConfig
    replica_manager: ReplicaManager
    controller: NodeToControllerChannel
    groups: GroupCoordinatorService
    producer_ids: ProducerIdManager
    fetch_sessions: FetchSessionCache
    transactions: TransactionCoordinatorService
    shares: ShareGroupService
    share_sessions: ShareSessionCache
    share_state: ShareCoordinatorService
    authorizer: Access = field(default_factory=Access)  # ACL checks (allows all if unset)
    quotas: ClientQuotas = field(default_factory=ClientQuotas)
    schema_validation: SchemaValidation | None = None  # None: no topic validates

    @property
    def image(self) -> MetadataImage:
        """The metadata image this node currently serves from."""
        return self.metadata.image
