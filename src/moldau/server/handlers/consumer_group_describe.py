"""ConsumerGroupDescribe (KIP-848): a consumer group's epochs, assignor and, per member,
its subscription, current assignment and target assignment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.group.assignors import Assignment as PartitionsByTopic
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.consumer_group_describe_request import (
    ConsumerGroupDescribeRequest,
)
from moldau.protocol.messages.consumer_group_describe_response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from moldau.security.access import OPERATIONS_NOT_REQUESTED
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1


async def handle(
    services: Services, ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    if "consumer" not in services.groups.config.rebalance_protocols:
        return ConsumerGroupDescribeResponse(
            groups=[
                DescribedGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION)
                for g in request.group_ids
            ]
        )
    access = services.authorizer
    names = services.image.topics_by_id
    default_assignor = services.groups.config.consumer_assignors[0]

    def assignment(partitions: PartitionsByTopic) -> Assignment:
        return Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
                for t, ps in sorted(partitions.items())
            ]
        )

    described = []
    for group_id in request.group_ids:
        if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(
                DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
            continue
        group = services.groups.describe_consumer_group(group_id)
        if isinstance(group, ErrorCode):
            message = (
                f"Group {group_id} not found." if group is ErrorCode.GROUP_ID_NOT_FOUND else None
            )
            described.append(
                DescribedGroup(group_id=group_id, error_code=group, error_message=message)
            )
            continue
        described.append(
            DescribedGroup(
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.target_assignment_epoch,
                assignor_name=group.preferred_assignor(default_assignor),
                members=[
                    Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=assignment(m.assignment.assigned),
                        target_assignment=assignment(group.target_assignment.get(m.member_id, {})),
                    )
                    for m in group.members.values()
                ],
                authorized_operations=access.operations(ctx, ResourceType.GROUP, group_id)
                if request.include_authorized_operations
                else OPERATIONS_NOT_REQUESTED,
            )
        )
    return ConsumerGroupDescribeResponse(groups=described)
