"""SyncGroup: the leader's assignment, handed to every member."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.sync_group_request import SyncGroupRequest
from moldau.protocol.messages.sync_group_response import SyncGroupResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SYNC_GROUP, 0, 5


async def handle(
    services: Services, ctx: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    if not services.authorizer.allowed(
        ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""
    ):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result = await services.groups.sync(
        request.group_id or "",
        generation_id=request.generation_id,
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id or "": a.assignment or b"" for a in request.assignments or []},
    )
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
