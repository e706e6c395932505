"""ShareGroupDescribe (KIP-932): a share group's epochs, members and their assignments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from moldau.coordinator.share.group import ASSIGNOR
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_groups_response import ListedGroup
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from moldau.protocol.messages.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SHARE_GROUP_DESCRIBE, 1, 1


def describe(services: Services, ctx: RequestContext, group_id: str) -> DescribedGroup:
    out = DescribedGroup(group_id=group_id)
    if not services.authorizer.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return out
    groups = services.groups
    if not groups.runtime.is_active(groups.partition_for(group_id)):
        out.error_code = ErrorCode.NOT_COORDINATOR
        return out
    group = services.shares.coordinator.groups.get(group_id)
    if group is None:
        out.error_code = ErrorCode.GROUP_ID_NOT_FOUND
        out.error_message = f"Group {group_id} not found."
        return out
    topics = services.image.topics
    out.group_state = group.state.value
    out.group_epoch = group.group_epoch
    out.assignment_epoch = group.assignment_epoch
    out.assignor_name = ASSIGNOR
    out.members = [
        Member(
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed),
            assignment=Assignment(
                topic_partitions=[
                    TopicPartitions(
                        topic_id=topics[t].topic_id, topic_name=t, partitions=list(parts)
                    )
                    for t, parts in sorted(m.assignment.items())
                    if t in topics
                ]
            ),
        )
        for m in group.members.values()
    ]
    return out


def listed_share_groups(services: Services, states: Sequence[str]) -> list[ListedGroup]:
    """ListGroups' entries for the share groups this node coordinates."""
    wanted = {s.lower() for s in states}
    return [
        ListedGroup(
            group_id=g.group_id,
            protocol_type="share",
            group_state=g.state.value,
            group_type="share",
        )
        for g in services.shares.coordinator.groups.values()
        if not wanted or g.state.value.lower() in wanted
    ]


async def handle(
    services: Services, ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(
        groups=[describe(services, ctx, g) for g in request.group_ids or []]
    )
