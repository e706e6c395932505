"""ShareGroupHeartbeat (KIP-932): joins, keeps alive and leaves a share group; answers the
member's epoch and, when it changed, its assignment (topic ids and partitions)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.coordinator.share.group import Assignment, Heartbeat
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from moldau.protocol.messages.share_group_heartbeat_response import (
    Assignment as WireAssignment,
)
from moldau.protocol.messages.share_group_heartbeat_response import (
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.metadata.image import MetadataImage
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1


def topic_shapes(image: MetadataImage, topics: Iterable[str]) -> dict[str, tuple[bytes, int]]:
    """Id and partition count of the topics that exist (the others are not assigned)."""
    return {
        t: (image.topics[t].topic_id, len(image.topics[t].partitions))
        for t in topics
        if t in image.topics
    }


def wire_assignment(image: MetadataImage, assignment: Assignment) -> WireAssignment:
    return WireAssignment(
        topic_partitions=[
            TopicPartitions(topic_id=image.topics[t].topic_id, partitions=list(parts))
            for t, parts in sorted(assignment.items())
            if t in image.topics
        ]
    )


async def handle(
    services: Services, ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    group_id = request.group_id or ""
    if not services.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId can't be empty."
        )
    groups = services.groups
    if not groups.runtime.is_active(groups.partition_for(group_id)):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR)
    image = services.image
    hb = Heartbeat(
        group_id,
        request.member_id or "",
        request.member_epoch,
        None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        request.rack_id,
        ctx.client_id or "",
        f"/{ctx.client_host}",
    )
    shares = services.shares
    result = await shares.heartbeat(hb, lambda topics: topic_shapes(image, topics))
    response = ShareGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id or None,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=shares.heartbeat_interval_ms(group_id),
    )
    if result.assignment is not None:
        response.assignment = wire_assignment(image, result.assignment)
    return response
