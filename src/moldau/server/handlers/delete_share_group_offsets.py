"""DeleteShareGroupOffsets (KIP-932): forget a share group's state for whole topics; the
group's next fetch of them starts again at ``share.auto.offset.reset``.

Kafka's rules: only for a share group (else GROUP_ID_NOT_FOUND) with no member (else
NON_EMPTY_GROUP); a topic that does not exist, or that the group holds no state for,
answers UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
)
from moldau.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.handlers.describe_share_group_offsets import empty_share_group_error

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0


async def handle(
    services: Services, ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id or ""
    access = services.authorizer
    error, message = empty_share_group_error(services, ctx, group_id, AclOperation.DELETE)
    if error:
        return DeleteShareGroupOffsetsResponse(error_code=error, error_message=message)
    names = [t.topic_name or "" for t in request.topics or []]
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    responses = []
    for topic in names:
        image = services.image.topics.get(topic)
        answer = DeleteShareGroupOffsetsResponseTopic(topic_name=topic)
        if image is not None:
            answer.topic_id = image.topic_id
        if topic not in readable:
            answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif image is None:
            answer.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            answer.error_message = "This server does not host this topic-partition."
        else:
            error, found = await services.shares.delete_offsets(
                group_id, topic, sorted(image.partitions), image.topic_id
            )
            if error:
                answer.error_code = error
            elif not found:
                answer.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                answer.error_message = "There is no offset information to delete."
        responses.append(answer)
    return DeleteShareGroupOffsetsResponse(responses=responses)
