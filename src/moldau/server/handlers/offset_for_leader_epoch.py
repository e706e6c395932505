"""OffsetForLeaderEpoch: where a leader epoch ended in this leader's log (KIP-320).

Consumers ask it after a leader change to validate their position: an end offset below
the position means the log was truncated under them. Brokers (CLUSTER_ACTION) may ask
about every topic, clients about the topics they may DESCRIBE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from moldau.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4


def end_offset(services: Services, topic: str, p: OffsetForLeaderPartition) -> EpochEndOffset:
    error, epoch, offset = services.replica_manager.end_offset_for_epoch(
        (topic, p.partition), p.leader_epoch, p.current_leader_epoch
    )
    return EpochEndOffset(
        error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=offset
    )


async def handle(
    services: Services, ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    names = [t.topic for t in request.topics]
    if services.authorizer.cluster(ctx, AclOperation.CLUSTER_ACTION, log_denied=False):
        allowed = set(names)
    else:
        allowed = services.authorizer.allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
    return OffsetForLeaderEpochResponse(
        topics=[
            OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=[
                    end_offset(services, t.topic, p)
                    if t.topic in allowed
                    else EpochEndOffset(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )
