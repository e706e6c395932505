"""ListOffsets: earliest, latest, max timestamp, or the first offset at a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from moldau.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

# v8: earliest-local (-4), v9: latest-tiered (-5) offsets.
API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LIST_OFFSETS, 1, 9


async def lookup(
    services: Services, topic: str, p: ListOffsetsPartition, isolation_level: int
) -> ListOffsetsPartitionResponse:
    found = await services.replica_manager.list_offset(
        (topic, p.partition_index),
        p.timestamp,
        isolation_level=isolation_level,
        current_leader_epoch=p.current_leader_epoch,
    )
    return ListOffsetsPartitionResponse(
        partition_index=p.partition_index,
        error_code=found.error,
        timestamp=found.timestamp,
        offset=found.offset,
        leader_epoch=found.leader_epoch,
    )


async def handle(
    services: Services, ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    visible = services.authorizer.allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name or "" for t in request.topics or [])
    )
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    await lookup(services, t.name or "", p, request.isolation_level)
                    if t.name in visible
                    else ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
