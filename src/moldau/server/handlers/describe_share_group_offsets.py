"""DescribeShareGroupOffsets (KIP-932, lag from KIP-1226): each share-partition's start
offset (SPSO), leader epoch and lag.

As Kafka's GroupCoordinatorService: a named topic that does not exist, and a partition
the group never read, answer start offset -1 (no offset information, not an error); no
topics (null) means every share-partition the group initialized (its
ShareGroupStatePartitionMetadata record). The lag counts the records
from the SPSO to the high watermark not yet acknowledged or archived: the records in
flight, acquired ones included, and those not delivered yet.

The start offset is read from the share coordinator (the durable state), so a partition
led by any node answers; the lag needs the high watermark, known where a replica of the
partition lives (else the lag is -1, unknown).
"""

from __future__ import annotations

import asyncio
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


def empty_share_group_error(
    services: Services, ctx: RequestContext, group_id: str, operation: AclOperation
) -> tuple[ErrorCode, str | None]:
    """Alter's and Delete's checks before any partition: ``operation`` on the group, the
    group-level checks, and no members (Kafka changes only an empty group's offsets)."""
    if not services.authorizer.allowed(ctx, operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    error, message = share_group_error(services, group_id)
    if error:
        return error, message
    if services.shares.coordinator.groups[group_id].members:
        return ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty."
    return ErrorCode.NONE, None


def lag(sp: SharePartition, high_watermark: int) -> int:
    """KIP-1226's share-partition lag: records up to the high watermark not yet done."""
    done = sp.count(RecordState.ACKNOWLEDGED) + sp.count(RecordState.ARCHIVED)
    return max(high_watermark - sp.start_offset - done, 0)


def high_watermark(services: Services, topic: str, partition: int) -> int | None:
    """The partition's high watermark as this node's replica (leader or follower) has it;
    None without a replica here."""
    replica = services.replica_manager.partition((topic, partition))
    return replica.high_watermark if replica is not None else None


async def _partition(
    services: Services, group_id: str, topic: str, topic_id: bytes, partition: int
) -> DescribeShareGroupOffsetsResponsePartition:
    out = DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition, start_offset=UNINITIALIZED, leader_epoch=UNINITIALIZED
    )
    image = services.image.partition(topic, partition)
    if image is None:
        return out
    error, sp = await services.shares.read_offset(group_id, topic, partition, topic_id)
    if error:
        out.error_code = error
        return out
    if sp is None:
        return out
    out.start_offset = sp.start_offset
    out.leader_epoch = image.leader_epoch
    hw = high_watermark(services, topic, partition)
    if hw is not None:
        out.lag = lag(sp, hw)
    return out


def _group_topics(services: Services, group_id: str) -> list[tuple[str, list[int]]]:
    """No topics named: the share-partitions whose state the group initialized, as its
    ShareGroupStatePartitionMetadata record says (a topic since deleted is left out;
    without a share coordinator, those held on this node)."""
    shares = services.shares
    if shares.store is None:
        held: dict[str, set[int]] = {}
        for topic, partition in shares.group_partitions(group_id):
            held.setdefault(topic, set()).add(partition)
        return [(t, sorted(ps)) for t, ps in sorted(held.items())]
    initialized = shares.coordinator.groups[group_id].initialized
    topics = services.image.topics
    return sorted(
        (name, sorted(ps))
        for topic_id, (name, ps) in initialized.items()
        if (image := topics.get(name)) is not None and image.topic_id == topic_id
    )


async def describe(
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
    if request.topics is None:
        wanted = _group_topics(services, group_id)
    else:
        wanted = [(t.topic_name or "", list(t.partitions or [])) for t in request.topics]
    allowed = access.allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in wanted)
    )
    topics = services.image.topics
    for topic, partitions in wanted:
        image = topics.get(topic)
        answer = DescribeShareGroupOffsetsResponseTopic(
            topic_name=topic, topic_id=image.topic_id if image is not None else b"\0" * 16
        )
        if topic in allowed:  # the share coordinators are asked at once
            answer.partitions = list(
                await asyncio.gather(
                    *(_partition(services, group_id, topic, answer.topic_id, p) for p in partitions)
                )
            )
        else:
            answer.partitions = [
                DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                for p in partitions
            ]
        if request.topics is None:  # only the share-partitions the group has
            answer.partitions = [
                p for p in answer.partitions if p.error_code or p.start_offset != UNINITIALIZED
            ]
        if request.topics is not None or answer.partitions:
            out.topics.append(answer)
    return out


async def handle(
    services: Services, ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(
        groups=[await describe(services, ctx, g) for g in request.groups or []]
    )
