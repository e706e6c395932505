"""AlterShareGroupOffsets (KIP-932): move share-partition start offsets, as
``kafka-share-groups.sh --reset-offsets`` does.

Kafka's rules (GroupCoordinatorService / GroupMetadataManager): only for a share group
(else GROUP_ID_NOT_FOUND) with no member (else NON_EMPTY_GROUP); a topic that does not
exist or a partition past its count answers UNKNOWN_TOPIC_OR_PARTITION. The share-partition
starts over at the new offset in a new state epoch of the share coordinator (whichever
node leads the partition): nothing is in flight, the next fetch begins there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
)
from moldau.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.handlers.describe_share_group_offsets import empty_share_group_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    group_id = request.group_id or ""
    access = services.authorizer
    error, message = empty_share_group_error(services, ctx, group_id, AclOperation.READ)
    if error:
        return AlterShareGroupOffsetsResponse(error_code=error, error_message=message)
    names = [t.topic_name or "" for t in request.topics or []]
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    responses = []
    for t in request.topics or []:
        topic = t.topic_name or ""
        image = services.image.topics.get(topic)
        answer = AlterShareGroupOffsetsResponseTopic(topic_name=topic)
        if image is not None:
            answer.topic_id = image.topic_id
        for p in t.partitions or []:
            result = AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
            if topic not in readable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif image is None or p.partition_index not in image.partitions:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = "This server does not host this topic-partition."
            else:
                result.error_code = await services.shares.alter_start_offset(
                    group_id, topic, p.partition_index, p.start_offset, image.topic_id
                )
            answer.partitions.append(result)
        responses.append(answer)
    return AlterShareGroupOffsetsResponse(responses=responses)
