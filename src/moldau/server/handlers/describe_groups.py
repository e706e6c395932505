"""DescribeGroups: state, protocol and members (with assignments when Stable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_groups_request import DescribeGroupsRequest
from moldau.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from moldau.security.access import OPERATIONS_NOT_REQUESTED
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_GROUPS, 0, 5


async def handle(
    services: Services, ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    access = services.authorizer
    described = []
    for group_id in request.groups or []:
        if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(
                DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
            continue
        d = services.groups.describe_group(group_id)
        if isinstance(d, ErrorCode):
            described.append(DescribedGroup(group_id=group_id, error_code=d))
            continue
        described.append(
            DescribedGroup(
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ],
                authorized_operations=access.operations(ctx, ResourceType.GROUP, group_id)
                if request.include_authorized_operations
                else OPERATIONS_NOT_REQUESTED,
            )
        )
    return DescribeGroupsResponse(groups=described)
