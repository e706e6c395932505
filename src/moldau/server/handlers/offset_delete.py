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

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    services: Services, ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    wanted = [
        (t.name or "", p.partition_index) for t in request.topics or [] for p in t.partitions or []
    ]
    error, results = await services.groups.delete_offsets(request.group_id or "", wanted)
    if error:
        return OffsetDeleteResponse(error_code=error)
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=results.get((t.name or "", p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions or []
                ],
            )
            for t in request.topics or []
        ]
    )
