"""ReadShareGroupStateSummary (KIP-932, inter-broker): a share-partition's start offset
and state epoch without its batches (what DescribeShareGroupOffsets needs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.read_share_group_state_summary_request import (
    PartitionData,
    ReadShareGroupStateSummaryRequest,
)
from moldau.protocol.messages.read_share_group_state_summary_response import (
    PartitionResult,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)
from moldau.server.handlers.read_share_group_state import each_partition, share_state_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, p: PartitionData) -> PartitionResult:
        error = share_state_error(services, ctx, group_id, topic_id, p.partition)
        if error:
            return PartitionResult(p.partition, error, start_offset=-1)
        error, state = await services.share_state.read_summary((group_id, topic_id, p.partition))
        return PartitionResult(
            p.partition, error, state_epoch=state.state_epoch, start_offset=state.start_offset
        )

    return ReadShareGroupStateSummaryResponse(
        results=[
            ReadStateSummaryResult(topic_id, partitions)
            for topic_id, partitions in await each_partition(request.topics or [], one)
        ]
    )
