"""FindCoordinator: where a group's coordinator runs (the leader of its offsets partition),
or a transactional id's (the leader of its ``__transaction_state`` partition)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.coordinator.group.service import GroupCoordinatorService
    from moldau.coordinator.txn.service import TransactionCoordinatorService
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.FIND_COORDINATOR, 0, 4

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _unavailable(key: str, message: str) -> Coordinator:
    return Coordinator(
        key=key,
        node_id=-1,
        host="",
        port=-1,
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
        error_message=message,
    )


async def locate(services: Services, key: str, key_type: int, listener: str) -> Coordinator:
    """The leader of the key's ``__consumer_offsets`` (``__transaction_state``) partition
    coordinates the group (the transactional id)."""
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.INVALID_REQUEST
        )
    groups = key_type == GROUP_KEY_TYPE
    coordinator: GroupCoordinatorService | TransactionCoordinatorService = (
        services.groups if groups else services.transactions
    )
    try:
        await coordinator.ensure_topic()
    except KafkaError as e:
        return _unavailable(key, str(e))
    topic = OFFSETS_TOPIC if groups else TRANSACTION_STATE_TOPIC
    partition = services.image.partition(topic, coordinator.partition_for(key))
    broker = services.image.brokers.get(partition.leader) if partition is not None else None
    endpoint = broker.endpoint(listener) if broker is not None else None
    if broker is None or endpoint is None:
        return _unavailable(key, "The coordinator is not available.")
    return Coordinator(
        key=key,
        node_id=broker.broker_id,
        host=endpoint.host,
        port=endpoint.port,
        error_message=None,
    )


def _refused(
    services: Services, ctx: RequestContext, key: str, key_type: int
) -> Coordinator | None:
    """DESCRIBE on the group or transactional id the coordinator is asked for."""
    if key_type == GROUP_KEY_TYPE:
        resource, error = ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif key_type == TRANSACTION_KEY_TYPE:
        resource, error = (
            ResourceType.TRANSACTIONAL_ID,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        )
    else:
        return None
    if services.authorizer.allowed(ctx, AclOperation.DESCRIBE, resource, key):
        return None
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=None)


async def _find(services: Services, ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    return _refused(services, ctx, key, key_type) or await locate(
        services, key, key_type, ctx.listener
    )


async def handle(
    services: Services, ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        keys = request.coordinator_keys or []
        return FindCoordinatorResponse(
            coordinators=[await _find(services, ctx, k, request.key_type) for k in keys]
        )
    c = await _find(services, ctx, request.key or "", request.key_type)
    return FindCoordinatorResponse(
        error_code=c.error_code,
        error_message=c.error_message,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )
