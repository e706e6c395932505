"""InitializeShareGroupState (KIP-932, inter-broker): start a share-partition's durable
state over at a start offset in a new state epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.initialize_share_group_state_request import (
    InitializeShareGroupStateRequest,
    PartitionData,
)
from moldau.protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
    InitializeStateResult,
    PartitionResult,
)
from moldau.server.handlers.read_share_group_state import each_partition, share_state_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: InitializeShareGroupStateRequest
) -> InitializeShareGroupStateResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, p: PartitionData) -> PartitionResult:
        error = share_state_error(services, ctx, group_id, topic_id, p.partition)
        if not error:
            error = await services.share_state.initialize(
                (group_id, topic_id, p.partition), p.state_epoch, p.start_offset
            )
        return PartitionResult(p.partition, error)

    return InitializeShareGroupStateResponse(
        results=[
            InitializeStateResult(topic_id, partitions)
            for topic_id, partitions in await each_partition(request.topics or [], one)
        ]
    )
