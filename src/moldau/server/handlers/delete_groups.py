"""DeleteGroups: empty groups only; their offsets are tombstoned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.delete_groups_request import DeleteGroupsRequest
from moldau.protocol.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.DELETE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: Broker, ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    results, effects = broker.groups.coordinator.delete_groups(
        broker.now_ms(), list(request.groups_names or [])
    )
    broker.groups.apply(effects)
    return DeleteGroupsResponse(
        results=[DeletableGroupResult(group_id=g, error_code=e) for g, e in results.items()]
    )
