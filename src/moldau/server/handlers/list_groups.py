"""ListGroups, with the v4 states filter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LIST_GROUPS, 0, 4


async def handle(
    services: Services, ctx: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    states = request.states_filter or ()
    if None in states:  # entries are non-nullable strings: a null one is a broken request
        return ListGroupsResponse(error_code=ErrorCode.INVALID_REQUEST)
    access = services.authorizer
    everything = access.cluster(ctx, AclOperation.DESCRIBE, log_denied=False)
    return ListGroupsResponse(
        groups=[
            ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state)
            for g in services.groups.list_groups(states)
            if everything
            or access.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_denied=False
            )
        ]
    )
