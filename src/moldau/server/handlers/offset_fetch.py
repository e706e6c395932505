"""OffsetFetch: one group (v1-7) or many (v8+, KIP-709); null topics means all."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from moldau.coordinator.group.results import PartitionOffset
from moldau.protocol.api_keys import ApiKey
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
    from moldau.server.broker import Broker
    from moldau.server.dispatch import RequestContext

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 1
MAX_VERSION = 9

MULTI_GROUP_VERSION = 8


def fetch(
    broker: Broker,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    topic_cls: type[Any],
    partition_cls: type[Any],
) -> list[Any]:
    """One group's committed offsets as response topics (v8+ and older use twin classes)."""
    wanted = None if topics is None else [(t, p) for t, parts in topics for p in parts]
    by_topic: dict[str, list[PartitionOffset]] = defaultdict(list)
    for o in broker.groups.coordinator.fetch_offsets(group_id, wanted):
        by_topic[o.topic].append(o)
    return [
        topic_cls(
            name=name,
            partitions=[
                partition_cls(
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
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
    broker: Broker, ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if ctx.api_version >= MULTI_GROUP_VERSION:
        return OffsetFetchResponse(
            groups=[
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    topics=fetch(
                        broker,
                        g.group_id or "",
                        _wanted(g.topics),
                        OffsetFetchResponseTopics,
                        OffsetFetchResponsePartitions,
                    ),
                )
                for g in request.groups or []
            ]
        )
    return OffsetFetchResponse(
        topics=fetch(
            broker,
            request.group_id or "",
            _wanted(request.topics),
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition,
        )
    )
