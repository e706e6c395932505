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

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.DESCRIBE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(
    services: Services, ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    described = []
    for group_id in request.groups or []:
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
            )
        )
    return DescribeGroupsResponse(groups=described)
