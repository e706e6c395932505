"""WriteShareGroupState (KIP-932, inter-broker): a share-partition leader writes the
delivery state of a share-partition to its share coordinator; answered once committed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.coordinator.share_state.shard import StateBatch, WriteState
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.write_share_group_state_request import (
    PartitionData,
    WriteShareGroupStateRequest,
)
from moldau.protocol.messages.write_share_group_state_response import (
    PartitionResult,
    WriteShareGroupStateResponse,
    WriteStateResult,
)
from moldau.server.handlers.read_share_group_state import each_partition, share_state_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.WRITE_SHARE_GROUP_STATE, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, p: PartitionData) -> PartitionResult:
        error = share_state_error(services, ctx, group_id, topic_id, p.partition)
        if not error:
            data = WriteState(
                p.state_epoch,
                p.leader_epoch,
                p.start_offset,
                tuple(
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ),
            )
            error = await services.share_state.write((group_id, topic_id, p.partition), data)
        return PartitionResult(p.partition, error)

    return WriteShareGroupStateResponse(
        results=[
            WriteStateResult(topic_id, partitions)
            for topic_id, partitions in await each_partition(request.topics or [], one)
        ]
    )
