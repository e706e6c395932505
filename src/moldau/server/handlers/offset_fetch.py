"""OffsetFetch: one group (v1-7) or many (v8+, KIP-709); null topics means all."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

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
    broker: Broker, group_id: str, topics: list[tuple[str, list[int]]] | None
) -> dict[str, list[PartitionOffset]]:
    wanted = None if topics is None else [(t, p) for t, parts in topics for p in parts]
    by_topic: dict[str, list[PartitionOffset]] = defaultdict(list)
    for o in broker.groups.coordinator.fetch_offsets(group_id, wanted):
        by_topic[o.topic].append(o)
    return by_topic


async def handle(
    broker: Broker, ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if ctx.api_version >= MULTI_GROUP_VERSION:
        groups = []
        for g in request.groups or []:
            topics = (
                None
                if g.topics is None
                else [(t.name or "", list(t.partition_indexes or [])) for t in g.topics]
            )
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=name,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=o.partition,
                                    committed_offset=o.offset,
                                    committed_leader_epoch=o.leader_epoch,
                                    metadata=o.metadata,
                                )
                                for o in offsets
                            ],
                        )
                        for name, offsets in fetch(broker, g.group_id or "", topics).items()
                    ],
                )
            )
        return OffsetFetchResponse(groups=groups)
    topics = (
        None
        if request.topics is None
        else [(t.name or "", list(t.partition_indexes or [])) for t in request.topics]
    )
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=o.partition,
                        committed_offset=o.offset,
                        committed_leader_epoch=o.leader_epoch,
                        metadata=o.metadata,
                    )
                    for o in offsets
                ],
            )
            for name, offsets in fetch(broker, request.group_id or "", topics).items()
        ]
    )
