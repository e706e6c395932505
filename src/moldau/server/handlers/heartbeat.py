"""Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.heartbeat_request import HeartbeatRequest
from moldau.protocol.messages.heartbeat_response import HeartbeatResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.HEARTBEAT, 0, 4


async def handle(
    services: Services, ctx: RequestContext, request: HeartbeatRequest
) -> HeartbeatResponse:
    if not services.authorizer.allowed(
        ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""
    ):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = await services.groups.heartbeat(
        request.group_id or "",
        member_id=request.member_id or "",
        generation_id=request.generation_id,
        group_instance_id=request.group_instance_id,
    )
    return HeartbeatResponse(error_code=error)
