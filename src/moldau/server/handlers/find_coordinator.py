"""FindCoordinator: this broker coordinates every group (it leads all offsets partitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 4

GROUP_KEY_TYPE = 0


async def locate(broker: Broker, key: str, key_type: int) -> Coordinator:
    if key_type != GROUP_KEY_TYPE:
        # Transactions come with the transaction coordinator (a later issue).
        return Coordinator(
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message="This broker has no transaction coordinator.",
        )
    await broker.groups.ensure_offsets_topic()
    endpoint = broker.advertised[0]
    return Coordinator(
        key=key, node_id=broker.node_id, host=endpoint.host, port=endpoint.port, error_message=None
    )


async def handle(
    broker: Broker, ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        keys = request.coordinator_keys or []
        return FindCoordinatorResponse(
            coordinators=[await locate(broker, k, request.key_type) for k in keys]
        )
    c = await locate(broker, request.key or "", request.key_type)
    return FindCoordinatorResponse(
        error_code=c.error_code,
        error_message=c.error_message,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )
