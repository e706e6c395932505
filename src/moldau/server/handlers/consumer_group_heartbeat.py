"""ConsumerGroupHeartbeat (KIP-848): a consumer of ``group.protocol=consumer`` joins,
heartbeats, reconciles and leaves through this one API; the coordinator assigns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.group.consumer_groups import ConsumerHeartbeat, TopicsView
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from moldau.protocol.messages.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.image_topics import ImageTopics

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1


async def handle(
    services: Services, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if "consumer" not in services.groups.config.rebalance_protocols:
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            error_message="The consumer group protocol is not enabled on this broker.",
        )
    if not services.authorizer.allowed(
        ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""
    ):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics: TopicsView = ImageTopics.of(services.image)
    names = request.subscribed_topic_names
    if names and len(
        services.authorizer.allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    ) < len(set(names)):
        # As Kafka: subscribing to a topic the principal may not describe is refused.
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    owned = (
        None
        if request.topic_partitions is None
        else {tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions}
    )
    result = await services.groups.consumer_group_heartbeat(
        ConsumerHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=request.subscribed_topic_names,
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client_host}",
        ),
        topics,
        services.image.group_configs.get(request.group_id, {}),
    )
    response = ConsumerGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
    )
    if result.assignment is not None:
        response.assignment = Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(result.assignment.items())
            ]
        )
    return response
