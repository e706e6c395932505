"""DescribeShareGroupOffsets (KIP-932, lag from KIP-1226): each share-partition's start
offset (SPSO), leader epoch and lag.

As Kafka's GroupCoordinatorService: a named topic that does not exist, and a partition
the group never read, answer start offset -1 (no offset information, not an error); no
topics (null) means every share-partition the group has. The lag counts the records
from the SPSO to the high watermark not yet acknowledged or archived: the records in
flight, acquired ones included, and those not delivered yet.

Share-partition state is held by the partition's leader until the durable share state
(the share coordinator) lands: a partition led by another node answers
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.coordinator.share.partition import RecordState, SharePartition
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from moldau.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1
UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET / DEFAULT_LEADER_EPOCH


def share_group_error(services: Services, group_id: str) -> tuple[ErrorCode, str | None]:
    """The group-level checks of the share-group offset APIs: a valid id, this node
    coordinates it, and it is a share group."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, None
    groups = services.groups
    if not groups.runtime.is_active(groups.partition_for(group_id)):
        return ErrorCode.NOT_COORDINATOR, None
    if group_id not in services.shares.coordinator.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    return ErrorCode.NONE, None


def remote_leader(services: Services, topic: str, partition: int) -> tuple[ErrorCode, str | None]:
    """NONE when this node leads ``topic-partition`` (and so holds its share-partitions)."""
    leader = services.replica_manager.partition((topic, partition))
    if leader is not None and leader.is_leader:
        return ErrorCode.NONE, None
    image = services.image.partition(topic, partition)
    where = f"node {image.leader}" if image is not None else "no node"
    return (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        f"The share-partition state of {topic}-{partition} is held by its leader ({where}).",
    )


def lag(sp: SharePartition, high_watermark: int) -> int:
    """KIP-1226's share-partition lag: records up to the high watermark not yet done."""
    done = sp.count(RecordState.ACKNOWLEDGED) + sp.count(RecordState.ARCHIVED)
    return max(high_watermark - sp.start_offset - done, 0)


def _partition(
    services: Services, group_id: str, topic: str, partition: int
) -> DescribeShareGroupOffsetsResponsePartition:
    out = DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition, start_offset=UNINITIALIZED, leader_epoch=UNINITIALIZED
    )
    if services.image.partition(topic, partition) is None:
        return out
    error, message = remote_leader(services, topic, partition)
    if error:
        out.error_code, out.error_message = error, message
        return out
    sp = services.shares.group_partitions(group_id).get((topic, partition))
    leader = services.replica_manager.partition((topic, partition))
    if sp is None or leader is None:
        return out
    out.start_offset = sp.start_offset
    out.leader_epoch = leader.leader_epoch
    out.lag = lag(sp, leader.high_watermark)
    return out


def describe(
    services: Services, ctx: RequestContext, request: DescribeShareGroupOffsetsRequestGroup
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = request.group_id or ""
    out = DescribeShareGroupOffsetsResponseGroup(group_id=group_id)
    access = services.authorizer
    if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return out
    out.error_code, out.error_message = share_group_error(services, group_id)
    if out.error_code:
        return out
    wanted: Iterable[tuple[str, list[int]]]
    if request.topics is None:
        held: dict[str, list[int]] = {}
        for topic, partition in sorted(services.shares.group_partitions(group_id)):
            held.setdefault(topic, []).append(partition)
        wanted = held.items()
    else:
        wanted = [(t.topic_name or "", list(t.partitions or [])) for t in request.topics]
    wanted = list(wanted)
    allowed = access.allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in wanted)
    )
    topics = services.image.topics
    for topic, partitions in wanted:
        image = topics.get(topic)
        answer = DescribeShareGroupOffsetsResponseTopic(
            topic_name=topic, topic_id=image.topic_id if image is not None else b"\0" * 16
        )
        for p in partitions:
            if topic in allowed:
                answer.partitions.append(_partition(services, group_id, topic, p))
            else:
                answer.partitions.append(
                    DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                )
        out.topics.append(answer)
    return out


async def handle(
    services: Services, ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(
        groups=[describe(services, ctx, g) for g in request.groups or []]
    )
