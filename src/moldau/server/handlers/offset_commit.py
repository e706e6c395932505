"""OffsetCommit: group-managed (generation checked) or simple (generation -1) commits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.group.results import OffsetCommit
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_commit_request import OffsetCommitRequest
from moldau.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 2
MAX_VERSION = 9


async def handle(
    services: Services, ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    image = services.image
    offsets = []
    unknown = set()
    for t in request.topics or []:
        topic = image.topics.get(t.name or "")
        for p in t.partitions or []:
            if topic is None or p.partition_index not in topic.partitions:
                unknown.add((t.name, p.partition_index))
                continue
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
                        error_code=(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                            if (t.name, p.partition_index) in unknown
                            else errors.get((t.name or "", p.partition_index), ErrorCode.NONE)
                        ),
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
