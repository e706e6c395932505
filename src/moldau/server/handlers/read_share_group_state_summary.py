"""ReadShareGroupStateSummary (KIP-932, inter-broker): a share-partition's start offset
and state epoch without its batches (what DescribeShareGroupOffsets needs)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from moldau.protocol.messages.read_share_group_state_summary_response import (
    PartitionResult,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)
from moldau.server.handlers.read_share_group_state import read_state

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, partition: int, leader_epoch: int) -> PartitionResult:
        error, state = await read_state(services, ctx, group_id, topic_id, partition, leader_epoch)
        return PartitionResult(
            partition, error, state_epoch=state.state_epoch, start_offset=state.start_offset
        )

    return ReadShareGroupStateSummaryResponse(
        results=[
            ReadStateSummaryResult(
                t.topic_id,
                list(
                    await asyncio.gather(
                        *(one(t.topic_id, p.partition, p.leader_epoch) for p in t.partitions)
                    )
                ),
            )
            for t in request.topics or []
        ]
    )
