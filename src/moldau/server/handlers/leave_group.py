"""LeaveGroup: one member (v0-2) or a batch of members (v3+, KIP-345)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.group.results import MemberIdentity
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.leave_group_request import LeaveGroupRequest
from moldau.protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LEAVE_GROUP, 0, 5

BATCH_VERSION = 3


async def handle(
    services: Services, ctx: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    if not services.authorizer.allowed(
        ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""
    ):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version >= BATCH_VERSION:
        members = [
            MemberIdentity(m.member_id or "", m.group_instance_id) for m in request.members or []
        ]
    else:
        members = [MemberIdentity(request.member_id or "")]
    error, errors = await services.groups.leave(request.group_id or "", members)
    if ctx.api_version < BATCH_VERSION:
        return LeaveGroupResponse(error_code=error or (errors[0] if errors else 0))
    return LeaveGroupResponse(
        error_code=error,
        members=[
            MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e
            )
            for m, e in zip(members, errors, strict=False)
        ],
    )
