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
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(
    broker: Broker, ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    wanted = [
        (t.name or "", p.partition_index) for t in request.topics or [] for p in t.partitions or []
    ]
    error, results, effects = broker.groups.coordinator.delete_offsets(
        broker.now_ms(), request.group_id or "", wanted
    )
    broker.groups.apply(effects)
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
