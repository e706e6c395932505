"""DeleteRecords: move partitions' log start offsets up (the low watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_records_request import DeleteRecordsRequest
from moldau.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_RECORDS, 0, 2


async def handle(
    services: Services, ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    rm = services.replica_manager
    deletable = services.authorizer.allowed_names(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name or "" for t in request.topics or [])
    )
    topics = []
    for t in request.topics or []:
        partitions = []
        for p in t.partitions or []:
            if t.name not in deletable:
                partitions.append(
                    DeleteRecordsPartitionResult(
                        partition_index=p.partition_index,
                        low_watermark=-1,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                )
                continue
            # offset -1 means the high watermark; offsets above it are refused.
            error, low_watermark = rm.delete_records((t.name or "", p.partition_index), p.offset)
            partitions.append(
                DeleteRecordsPartitionResult(
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=partitions))
    if any(p.error_code == ErrorCode.NONE for t in topics for p in t.partitions or []):
        # Checkpoint the new log start offsets now, so a crash cannot resurrect records
        # the client was told are gone.
        rm.log_manager.checkpoint()
    return DeleteRecordsResponse(topics=topics)
