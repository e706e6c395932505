"""JoinGroup: parked until the group's join phase completes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.join_group_request import JoinGroupRequest
from moldau.protocol.messages.join_group_response import (
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.image_topics import ImageTopics

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.JOIN_GROUP, 0, 7

MEMBER_ID_REQUIRED_VERSION = 4  # KIP-394


async def handle(
    services: Services, ctx: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    if not services.authorizer.allowed(
        ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""
    ):
        return JoinGroupResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            protocol_name=None if ctx.api_version >= 7 else "",
        )
    session_timeout = request.session_timeout_ms
    rebalance_timeout = request.rebalance_timeout_ms
    result = await services.groups.join(
        request.group_id or "",
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id,
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=rebalance_timeout if rebalance_timeout >= 0 else session_timeout,
        protocol_type=request.protocol_type or "",
        protocols=[(p.name or "", p.metadata or b"") for p in request.protocols or []],
        require_known_member_id=(
            ctx.api_version >= MEMBER_ID_REQUIRED_VERSION and request.group_instance_id is None
        ),
        topics=ImageTopics.of(services.image),
    )
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # Nullable only from v7: older clients get "" while no protocol is chosen.
        protocol_name=result.protocol_name if ctx.api_version >= 7 else result.protocol_name or "",
        leader=result.leader,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )
