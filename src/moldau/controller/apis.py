"""The controller's side of its APIs: wire requests in, wire responses out.

Brokers send these requests to the active controller (forwarded client requests, auto
topic creation, producer-id blocks, their own lifecycle, ISR changes); a single node calls
them in-process. Each request is one operation of the :class:`QuorumController`, decided
against its latest state. A new API: one module of handler functions taking the
:class:`ControllerContext`, and its entries in :data:`HANDLERS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from moldau.controller import (
    broker_apis,
    config_apis,
    feature_apis,
    partition_apis,
    producer_id_apis,
    quorum_apis,
    security_apis,
    topic_apis,
)
from moldau.controller.context import ControllerContext
from moldau.controller.quorum_controller import ControllerResult
from moldau.controller.replication_control import PREFERRED
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError

Handler = Callable[[ControllerContext, int, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    ApiKey.BROKER_REGISTRATION: broker_apis.broker_registration,
    ApiKey.BROKER_HEARTBEAT: broker_apis.broker_heartbeat,
    ApiKey.UNREGISTER_BROKER: broker_apis.unregister_broker,
    ApiKey.ALTER_PARTITION: partition_apis.alter_partition,
    ApiKey.ELECT_LEADERS: partition_apis.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_apis.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_apis.list_partition_reassignments,
    ApiKey.ALLOCATE_PRODUCER_IDS: producer_id_apis.allocate_producer_ids,
    ApiKey.DESCRIBE_QUORUM: quorum_apis.describe_quorum,
    ApiKey.CREATE_TOPICS: topic_apis.create_topics,
    ApiKey.DELETE_TOPICS: topic_apis.delete_topics,
    ApiKey.CREATE_PARTITIONS: topic_apis.create_partitions,
    ApiKey.ALTER_CONFIGS: config_apis.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: config_apis.incremental_alter_configs,
    ApiKey.CREATE_ACLS: security_apis.create_acls,
    ApiKey.DELETE_ACLS: security_apis.delete_acls,
    ApiKey.ALTER_CLIENT_QUOTAS: security_apis.alter_client_quotas,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security_apis.alter_user_scram_credentials,
    ApiKey.UPDATE_FEATURES: feature_apis.update_features,
}


class ControllerApis:
    """Routes each request to its handler, and runs the active controller's upkeep."""

    def __init__(self, context: ControllerContext) -> None:
        self.context = context

    async def handle(self, api_key: int, version: int, request: Any) -> Any:
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise KafkaError(
                f"the controller does not handle API {api_key}", ErrorCode.INVALID_REQUEST
            )
        return await handler(self.context, version, request)

    # -- upkeep of the active controller ----------------------------------------------
    async def expire_broker_sessions(self) -> None:
        """Fence the brokers whose heartbeats stopped (run periodically)."""
        c = self.context
        now = c.clock.now_ms()
        await c.quorum.write(
            lambda image: ControllerResult(None, c.cluster.expire_sessions(image, now))
        )

    async def balance_leaders(self, max_imbalance_percent: int) -> None:
        """``auto.leader.rebalance.enable``: preferred elections where brokers lead too
        few of the partitions they prefer."""
        replication = self.context.replication

        def op(image: MetadataImage) -> ControllerResult[None]:
            records: list[MetadataRecord] = []
            for topic, partition in replication.imbalanced_partitions(image, max_imbalance_percent):
                _, _, record = replication.elect(image.apply(records), topic, partition, PREFERRED)
                if record is not None:
                    records.append(record)
            return ControllerResult(None, records)

        await self.context.quorum.write(op)
