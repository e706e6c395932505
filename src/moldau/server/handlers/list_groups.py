"""ListGroups, with the v4 states filter and the v5 types filter (classic, consumer, share)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.handlers.share_group_describe import listed_share_groups

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LIST_GROUPS, 0, 5


async def handle(
    services: Services, ctx: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    states = request.states_filter or ()
    types = request.types_filter or ()
    if None in states or None in types:
        # entries are non-nullable strings: a null one is a broken request
        return ListGroupsResponse(error_code=ErrorCode.INVALID_REQUEST)
    access = services.authorizer
    everything = access.cluster(ctx, AclOperation.DESCRIBE, log_denied=False)
    groups = [
        ListedGroup(
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in services.groups.list_groups(states, types)
    ]
    if not types or "share" in {t.lower() for t in types}:
        groups += listed_share_groups(services, states)
    return ListGroupsResponse(
        groups=[
            g
            for g in groups
            if everything
            or access.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_denied=False
            )
        ]
    )
