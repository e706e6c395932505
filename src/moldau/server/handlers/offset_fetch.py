"""OffsetFetch: one group (v1-7) or many (v8+, KIP-709); null topics means all. With
``require_stable`` (v7+, KIP-447) a partition whose offset a transaction has pending
answers UNSTABLE_OFFSET_COMMIT, and the consumer retries until the transaction ends."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from moldau.coordinator.group.results import PartitionOffset
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from moldau.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from moldau.server.request_context import RequestContext
    from moldau.server.services import Services

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.OFFSET_FETCH, 1, 9

MULTI_GROUP_VERSION = 8


def fetch(
    services: Services,
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    topic_cls: type[Any],
    partition_cls: type[Any],
    require_stable: bool = False,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, list[Any]]:
    """One group's committed offsets as response topics (v8+ and older use twin classes),
    or the coordinator's error (not coordinator, loading) for the whole group.

    As Kafka: DESCRIBE on the group, and only offsets of topics the principal may
    DESCRIBE (left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED if named).
    ``member``: v9's (member id, member epoch), checked against a KIP-848 group."""
    access = services.authorizer
    if not access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    refused = []
    if topics is not None:
        visible = access.allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in topics)
        )
        refused = [
            topic_cls(
                name=t,
                partitions=[
                    partition_cls(
                        partition_index=p,
                        committed_offset=-1,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in parts
                ],
            )
            for t, parts in topics
            if t not in visible
        ]
        topics = [(t, parts) for t, parts in topics if t in visible]
    wanted = None if topics is None else [(t, p) for t, parts in topics for p in parts]
    try:
        found = services.groups.fetch_offsets(group_id, wanted, require_stable, *member)
    except KafkaError as e:
        return e.code, []
    by_topic: dict[str, list[PartitionOffset]] = defaultdict(list)
    for o in found:
        by_topic[o.topic].append(o)
    if topics is None:
        visible = access.allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic, log_denied=False
        )
        by_topic = defaultdict(list, {t: o for t, o in by_topic.items() if t in visible})
    return ErrorCode.NONE, [
        topic_cls(
            name=name,
            partitions=[
                partition_cls(
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT if o.unstable else ErrorCode.NONE,
                )
                for o in offsets
            ],
        )
        for name, offsets in by_topic.items()
    ] + refused


def _wanted(topics: list[Any] | None) -> list[tuple[str, list[int]]] | None:
    return (
        None
        if topics is None
        else [(t.name or "", list(t.partition_indexes or [])) for t in topics]
    )


async def handle(
    services: Services, ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if ctx.api_version >= MULTI_GROUP_VERSION:
        groups = []
        for g in request.groups or []:
            error, topics = fetch(
                services,
                ctx,
                g.group_id or "",
                _wanted(g.topics),
                OffsetFetchResponseTopics,
                OffsetFetchResponsePartitions,
                request.require_stable,
                (g.member_id, g.member_epoch),
            )
            groups.append(
                OffsetFetchResponseGroup(group_id=g.group_id, error_code=error, topics=topics)
            )
        return OffsetFetchResponse(groups=groups)
    error, topics = fetch(
        services,
        ctx,
        request.group_id or "",
        _wanted(request.topics),
        OffsetFetchResponseTopic,
        OffsetFetchResponsePartition,
        request.require_stable,
    )
    return OffsetFetchResponse(error_code=error, topics=topics)
