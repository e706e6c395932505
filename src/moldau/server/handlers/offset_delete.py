"""OffsetDelete (KIP-496): drop a group's offsets for topics it no longer reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.offset_delete_request import OffsetDeleteRequest
from moldau.protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.OFFSET_DELETE, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    access = services.authorizer
    if not access.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id or ""):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = access.allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name or "" for t in request.topics or [])
    )
    wanted = [
        (t.name or "", p.partition_index)
        for t in request.topics or []
        if t.name in readable
        for p in t.partitions or []
    ]
    error, results = await services.groups.delete_offsets(request.group_id or "", wanted)
    if error:
        return OffsetDeleteResponse(error_code=error)
    unauthorized = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=results.get((t.name or "", p.partition_index), ErrorCode.NONE)
                        if t.name in readable
                        else unauthorized,
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
