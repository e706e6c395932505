"""OffsetCommit: group-managed (generation checked) or simple (generation -1) commits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.group.results import OffsetCommit
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.error_responses import error_response
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_commit_request import OffsetCommitRequest
from moldau.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.OFFSET_COMMIT, 2, 9


async def handle(
    services: Services, ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    access = services.authorizer
    if not access.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id or ""):
        return error_response(API_KEY, request, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    readable = access.allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name or "" for t in request.topics or [])
    )
    image = services.image
    offsets = []
    refused: dict[tuple[str | None, int], ErrorCode] = {}
    for t in request.topics or []:
        topic = image.topics.get(t.name or "")
        for p in t.partitions or []:
            if t.name not in readable:
                refused[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets.append(
                    OffsetCommit(
                        t.name or "",
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                )
    errors = await services.groups.commit_offsets(
        request.group_id or "",
        offsets,
        member_id=request.member_id or "",
        generation_id=request.generation_id_or_member_epoch,
        group_instance_id=request.group_instance_id,
        retention_time_ms=request.retention_time_ms,
    )
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=refused.get(
                            (t.name, p.partition_index),
                            errors.get((t.name or "", p.partition_index), ErrorCode.NONE),
                        ),
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
