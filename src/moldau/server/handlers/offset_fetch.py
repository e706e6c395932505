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

if TYPE_CHECKING:
    from moldau.server.dispatch import RequestContext
    from moldau.server.services import Services

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 1
MAX_VERSION = 9

MULTI_GROUP_VERSION = 8


def fetch(
    services: Services,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    topic_cls: type[Any],
    partition_cls: type[Any],
    require_stable: bool = False,
) -> tuple[ErrorCode, list[Any]]:
    """One group's committed offsets as response topics (v8+ and older use twin classes),
    or the coordinator's error (not coordinator, loading) for the whole group."""
    wanted = None if topics is None else [(t, p) for t, parts in topics for p in parts]
    try:
        found = services.groups.fetch_offsets(group_id, wanted, require_stable)
    except KafkaError as e:
        return e.code, []
    by_topic: dict[str, list[PartitionOffset]] = defaultdict(list)
    for o in found:
        by_topic[o.topic].append(o)
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
    ]


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
                g.group_id or "",
                _wanted(g.topics),
                OffsetFetchResponseTopics,
                OffsetFetchResponsePartitions,
                request.require_stable,
            )
            groups.append(
                OffsetFetchResponseGroup(group_id=g.group_id, error_code=error, topics=topics)
            )
        return OffsetFetchResponse(groups=groups)
    error, topics = fetch(
        services,
        request.group_id or "",
        _wanted(request.topics),
        OffsetFetchResponseTopic,
        OffsetFetchResponsePartition,
        request.require_stable,
    )
    return OffsetFetchResponse(error_code=error, topics=topics)
