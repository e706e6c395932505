"""DeleteShareGroupState (KIP-932, inter-broker): forget a share-partition's durable state
(tombstones in ``__share_group_state``), as when its group is deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_share_group_state_request import (
    DeleteShareGroupStateRequest,
    PartitionData,
)
from moldau.protocol.messages.delete_share_group_state_response import (
    DeleteShareGroupStateResponse,
    DeleteStateResult,
    PartitionResult,
)
from moldau.server.handlers.read_share_group_state import each_partition, share_state_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    group_id = request.group_id or ""

    async def one(topic_id: bytes, p: PartitionData) -> PartitionResult:
        partition = p.partition
        error = share_state_error(services, ctx, group_id, topic_id, partition)
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            error = ErrorCode.NONE  # the state of a deleted topic may still be forgotten
        if not error:
            error = await services.share_state.delete((group_id, topic_id, partition))
        return PartitionResult(partition, error)

    return DeleteShareGroupStateResponse(
        results=[
            DeleteStateResult(topic_id, partitions)
            for topic_id, partitions in await each_partition(request.topics or [], one)
        ]
    )
