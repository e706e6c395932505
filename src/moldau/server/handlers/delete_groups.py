"""DeleteGroups: empty groups only; their offsets are tombstoned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_groups_request import DeleteGroupsRequest
from moldau.protocol.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_GROUPS, 0, 2


async def handle(
    services: Services, ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    names = list(request.groups_names or [])
    deletable = services.authorizer.allowed_names(
        ctx, AclOperation.DELETE, ResourceType.GROUP, names
    )
    results = await services.groups.delete_groups([g for g in names if g in deletable])
    refused = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names if g not in deletable}
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=g, error_code=e) for g, e in (results | refused).items()
        ]
    )
