"""ShareAcknowledge (KIP-932): accept, release or reject acquired records without
fetching; epoch -1 also closes the share session, giving back what the member holds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from moldau.protocol.messages.share_acknowledge_response import (
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from moldau.security.acl import AclOperation, ResourceType
from moldau.server.share_session import CLOSE_EPOCH, OPEN_EPOCH

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.SHARE_ACKNOWLEDGE, 1, 1


class AckBatch(Protocol):
    first_offset: int
    last_offset: int
    acknowledge_types: list[int]


async def acknowledge(
    services: Services,
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    topic_id: bytes,
    partition: int,
    batches: Sequence[AckBatch],
) -> ErrorCode:
    """Apply one partition's acknowledgement batches (ShareFetch piggybacks them too)."""
    topic = services.image.topics_by_id.get(topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not services.authorizer.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return await services.shares.acknowledge(
        group_id,
        member_id,
        topic,
        partition,
        ((b.first_offset, b.last_offset, list(b.acknowledge_types or [])) for b in batches),
        topic_id,
    )


def group_error(
    services: Services, ctx: RequestContext, group_id: str, member_id: str
) -> tuple[ErrorCode, str | None]:
    """The request-level checks ShareFetch and ShareAcknowledge share."""
    if not services.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if not group_id or not member_id:
        return ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set."
    return ErrorCode.NONE, None


def count_requests(
    services: Services, acknowledgement: bool, errors: Iterable[tuple[bytes, int]]
) -> None:
    """Kafka's BrokerTopicMetrics share request meters from a request's (topic id, error
    code) per partition: each topic counts once, and as failed if a partition failed."""
    names = services.image.topics_by_id
    topics: set[str] = set()
    failed: set[str] = set()
    for topic_id, error in errors:
        name = names.get(topic_id)
        if name is not None:
            topics.add(name)
            if error:
                failed.add(name)
    services.replica_manager.topic_stats.share_requests(acknowledgement, topics, failed)


def by_topic(results: Iterable[tuple[bytes, PartitionData]]) -> list[ShareAcknowledgeTopicResponse]:
    topics: dict[bytes, ShareAcknowledgeTopicResponse] = {}
    for topic_id, data in results:
        topics.setdefault(
            topic_id, ShareAcknowledgeTopicResponse(topic_id=topic_id)
        ).partitions.append(data)
    return list(topics.values())


async def handle(
    services: Services, ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    group_id, member_id = request.group_id or "", request.member_id or ""
    error, message = group_error(services, ctx, group_id, member_id)
    if error:
        return ShareAcknowledgeResponse(error_code=error, error_message=message)
    epoch = request.share_session_epoch
    if epoch == OPEN_EPOCH:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    error, _ = services.share_sessions.update(group_id, member_id, epoch)
    if error:
        return ShareAcknowledgeResponse(error_code=error)
    results = [
        (
            t.topic_id,
            PartitionData(
                partition_index=p.partition_index,
                error_code=await acknowledge(
                    services,
                    ctx,
                    group_id,
                    member_id,
                    t.topic_id,
                    p.partition_index,
                    p.acknowledgement_batches or [],
                ),
            ),
        )
        for t in request.topics or []
        for p in t.partitions or []
    ]
    count_requests(services, True, ((topic_id, d.error_code) for topic_id, d in results))
    if epoch == CLOSE_EPOCH:
        services.shares.release_member(group_id, member_id)
    return ShareAcknowledgeResponse(responses=by_topic(results))
